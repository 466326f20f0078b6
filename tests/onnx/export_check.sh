#!/bin/sh
# ONNX export checked outside oar: test_onnx_export writes the zoo's models and a many-op program
# with an input and oar's output each; tests/onnx/export_check.py checks them with onnx.checker
# (full check) and, where onnxruntime imports, runs them there. The python is $OAR_ORT_PYTHON
# (a venv with onnxruntime) or Debian's /usr/bin/python3. Skips (77) without protobuf-c in the
# build or without the onnx package.
# Usage: export_check.sh TEST_ONNX_EXPORT SOURCE_DIR
set -eu
test_bin=$1
src=$2
py=${OAR_ORT_PYTHON:-/usr/bin/python3}
if ! [ -x "$py" ] || ! "$py" -c "import onnx, numpy" 2>/dev/null; then
  echo "onnx_export_check: skipped: $py with the onnx and numpy packages not found"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
set +e
OAR_ONNX_EXPORT_DIR=$dir "$test_bin" > "$dir/test.log" 2>&1
rc=$?
set -e
if [ $rc -eq 77 ]; then cat "$dir/test.log"; exit 77; fi
if [ $rc -ne 0 ]; then cat "$dir/test.log"; exit 1; fi
"$py" "$src/tests/onnx/export_check.py" "$dir"
