#!/bin/sh
# Quantized ONNX models onto oar's int8 ops (src/io/onnx/onnx_qdq.c): the cases of
# tests/onnx/quant_cases (written by tests/onnx/quant_cases.py, expected outputs from onnxruntime
# 1.16.3, or exact integer sums where it has no kernel) through `oar onnx-test`, int8 outputs
# compared exactly; every case in quant_cases_pass.txt must pass; each case named *_int8 must
# compile to qconv2d/qlinear with no float convolution, linear or matmul left (`oar inspect`
# prints the load-time program), each *_float case to the float path; each malformed model of
# tests/onnx/quant_bad is refused with the error expected.txt names. Skips (77) without ONNX
# support in the build. Registered at every ISA cap (OAR_CPU_ISA).
# Usage: quant_cases.sh OAR_BINARY SOURCE_DIR
set -eu
oar=$1
src=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
"$oar" onnx-test "$src/tests/onnx/quant_cases" --expect "$src/tests/onnx/quant_cases_pass.txt" > "$out" 2>&1
rc=$?
set -e
if grep -q "built without protobuf-c" "$out"; then
  echo "onnx_quant_cases: skipped: oar was built without protobuf-c (no ONNX import)"
  exit 77
fi
sed -n '/^operator /,$p' "$out"
fail=0
if grep -q "^FAIL" "$out" || [ "$rc" -ne 0 ]; then
  grep "^FAIL\|REGRESSION" "$out" || cat "$out"
  fail=1
fi
n_int8=0
for d in "$src"/tests/onnx/quant_cases/test_*; do
  name=$(basename "$d")
  "$oar" inspect "$d/model.onnx" > "$out" 2>&1 || { echo "FAIL $name: oar inspect failed"; cat "$out"; fail=1; continue; }
  int8=$(grep -cE "= (qconv2d|qlinear)\(" "$out" || true)
  float=$(grep -cE "= (conv2d|conv2d_act|linear|linear_act|matmul|max_pool2d)\(" "$out" || true)
  case "$name" in
    *_int8)
      n_int8=$((n_int8 + 1))
      if [ "$int8" -eq 0 ] || [ "$float" -ne 0 ]; then
        echo "FAIL $name: expected the int8 ops only, got $int8 int8 and $float float ops:"; cat "$out"; fail=1
      fi ;;
    *_float)
      if [ "$int8" -ne 0 ]; then echo "FAIL $name: expected the float path, got int8 ops:"; cat "$out"; fail=1; fi ;;
  esac
done
echo "onnx_quant_cases: $n_int8 cases run on qconv2d/qlinear"
n=0
tab=$(printf '\t')
while IFS="$tab" read -r name want; do
  case "$name" in ''|'#'*) continue ;; esac
  n=$((n + 1))
  set +e
  "$oar" inspect "$src/tests/onnx/quant_bad/$name.onnx" > "$out" 2>&1
  rc=$?
  set -e
  if [ "$rc" -eq 0 ] || ! grep -qF -- "$want" "$out"; then
    echo "FAIL malformed $name: expected a refusal containing '$want', got (exit $rc):"
    head -c 600 "$out"; echo
    fail=1
  fi
done < "$src/tests/onnx/quant_bad/expected.txt"
echo "onnx_quant_cases: $n malformed models checked"
exit $fail
