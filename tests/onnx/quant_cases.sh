#!/bin/sh
# Quantized ONNX models onto oar's int8 ops (src/io/onnx/onnx_qdq.c): the cases of
# tests/onnx/quant_cases (written by tests/onnx/quant_cases.py, expected outputs from onnxruntime
# 1.16.3, or exact integer sums where it has no kernel) through `oar onnx-test`, int8 outputs
# compared exactly; every case in quant_cases_pass.txt must pass; each case named *_int8 must
# compile to qconv2d/qlinear/qadd/qlut with no float convolution, linear or matmul left (`oar inspect`
# prints the load-time program; *add*_int8 cases: to qadd, no float add or dequantize left), each *_float case to the float path; each malformed model of
# tests/onnx/quant_bad is refused with the error expected.txt names. Skips (77) without ONNX
# support in the build. Registered at every ISA cap (OAR_CPU_ISA).
# Usage: quant_cases.sh OAR_BINARY SOURCE_DIR
set -eu
oar=$1
src=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
. "$src/tests/onnx/cases_lib.sh"
run_cases onnx_quant_cases quant_cases
n_int8=0
for d in "$src"/tests/onnx/quant_cases/test_*; do
  name=$(basename "$d")
  "$oar" inspect "$d/model.onnx" > "$out" 2>&1 || { echo "FAIL $name: oar inspect failed"; cat "$out"; fail=1; continue; }
  int8=$(grep -cE "= (qconv2d|qlinear|qadd|qlut)\(" "$out" || true)
  float=$(grep -cE "= (conv2d|conv2d_act|linear|linear_act|matmul|max_pool2d)\(" "$out" || true)
  case "$name" in
    *_int8)
      n_int8=$((n_int8 + 1))
      if [ "$int8" -eq 0 ] || [ "$float" -ne 0 ]; then
        echo "FAIL $name: expected the int8 ops only, got $int8 int8 and $float float ops:"; cat "$out"; fail=1
      fi
      case "$name" in *add*_int8) # a QDQ residual Add or QLinearAdd: qadd on the bytes, no float add left
        if ! grep -qE "= qadd\(" "$out" || grep -qE "= (add|dequantize)\(" "$out"; then
          echo "FAIL $name: expected qadd and no float add or dequantize:"; cat "$out"; fail=1
        fi ;;
      esac ;;
    *_float)
      if [ "$int8" -ne 0 ]; then echo "FAIL $name: expected the float path, got int8 ops:"; cat "$out"; fail=1; fi ;;
  esac
done
echo "onnx_quant_cases: $n_int8 cases run on qconv2d/qlinear"
check_refusals onnx_quant_cases "$src/tests/onnx/quant_bad"
exit $fail
