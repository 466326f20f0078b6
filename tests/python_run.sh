#!/bin/sh
# Runs the Python front end's pytest suite: python_run.sh PYTHON PACKAGE_DIR TESTS_DIR [PRELOAD].
# PRELOAD (the sanitizer build) lists the sanitizer runtimes to load into the interpreter.
# Exit 77 (CTest skip) with the reason when pytest or numpy is missing.
py=$1 pkg=$2 tests=$3 preload=$4
if ! "$py" -c "import pytest" 2>/dev/null; then
  echo "python_tests: skipped: pytest is absent for $py (apt-get install python3-pytest)"; exit 77
fi
if ! "$py" -c "import numpy" 2>/dev/null; then
  echo "python_tests: skipped: numpy is absent for $py (apt-get install python3-numpy)"; exit 77
fi
cd "$pkg" || exit 1
if [ -n "$preload" ]; then
  # Python's own allocations at exit are not ours to report (detect_leaks=0 comes last, so it wins
  # over a caller's detect_leaks=1); the quarantine makes RSS useless
  export LD_PRELOAD="$preload" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" OAR_PY_SANITIZED=1
fi
PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" exec "$py" -m pytest -q -p no:cacheprovider "$tests"
