#!/bin/sh
# ONNX control flow (If, Loop) through `oar onnx-test`: the cases of tests/onnx/control_cases
# (written by tests/onnx/control_cases.py: expected outputs from onnxruntime) give no wrong
# answers and every case listed in control_cases_pass.txt passes; each malformed model of
# tests/onnx/control_bad is refused with the error expected.txt names. Skips (77) without ONNX
# support in the build.
# Usage: control_cases.sh OAR_BINARY SOURCE_DIR
set -eu
oar=$1
src=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
"$oar" onnx-test "$src/tests/onnx/control_cases" --expect "$src/tests/onnx/control_cases_pass.txt" > "$out" 2>&1
rc=$?
set -e
if grep -q "built without protobuf-c" "$out"; then
  echo "onnx_control_cases: skipped: oar was built without protobuf-c (no ONNX import)"
  exit 77
fi
sed -n '/^operator /,$p' "$out"
fail=0
if grep -q "^FAIL" "$out" || [ "$rc" -ne 0 ]; then
  grep "^FAIL\|REGRESSION" "$out" || cat "$out"
  fail=1
fi
n=0
tab=$(printf '\t')
while IFS="$tab" read -r name want; do
  case "$name" in ''|'#'*) continue ;; esac
  n=$((n + 1))
  set +e
  "$oar" inspect "$src/tests/onnx/control_bad/$name.onnx" > "$out" 2>&1
  rc=$?
  set -e
  if [ "$rc" -eq 0 ] || ! grep -qF -- "$want" "$out"; then
    echo "FAIL malformed $name: expected a refusal containing '$want', got (exit $rc):"
    head -c 600 "$out"; echo
    fail=1
  fi
done < "$src/tests/onnx/control_bad/expected.txt"
echo "onnx_control_cases: $n malformed models checked"
exit $fail
