#!/bin/sh
# ONNX sequences and optionals through `oar onnx-test`: the cases of tests/onnx/seq_cases (written
# by tests/onnx/seq_cases.py: expected outputs from onnxruntime 1.16.3; sequence graph inputs and
# outputs as SequenceProto files) give no wrong answers and every case listed in
# seq_cases_pass.txt passes; each model of tests/onnx/seq_bad is refused with the error
# expected.txt names; `oar infer` prints a sequence output and refuses a sequence input. Skips
# (77) without ONNX support in the build.
# Usage: seq_cases.sh OAR_BINARY SOURCE_DIR
set -eu
oar=$1
src=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
. "$src/tests/onnx/cases_lib.sh"
run_cases onnx_seq_cases seq_cases
check_refusals onnx_seq_cases "$src/tests/onnx/seq_bad"
# a .npy of f32 zeros [2, 3] (a 128-byte v1.0 header, then 24 bytes)
npy=$(mktemp --suffix=.npy)
{ printf '\223NUMPY\001\000\166\000'; printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
  head -c 24 /dev/zero; } > "$npy"
set +e
"$oar" infer "$src/tests/onnx/seq_cases/test_seq_construct_output/model.onnx" --input "$npy" > "$out" 2>&1
rc=$?
set -e
if [ "$rc" -ne 0 ] || ! grep -q "output 's2': a sequence of 2 tensors: f32\[2, 3\], f32\[2, 3\]" "$out"; then
  echo "FAIL oar infer of a sequence output (exit $rc):"; cat "$out"; fail=1
fi
set +e
"$oar" infer "$src/tests/onnx/seq_cases/test_seq_graph_input/model.onnx" --input "$npy" --input "$npy" > "$out" 2>&1
rc=$?
set -e
if [ "$rc" -eq 0 ] || ! grep -q "input 0 ('s') is a sequence; oar infer takes tensors" "$out"; then
  echo "FAIL oar infer of a sequence input: expected a refusal (exit $rc):"; cat "$out"; fail=1
fi
rm -f "$npy"
echo "onnx_seq_cases: oar infer checked on a sequence output and a sequence input"
exit $fail
