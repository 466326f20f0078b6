#!/bin/sh
# ONNX sequences and optionals through `oar onnx-test`: the cases of tests/onnx/seq_cases (written
# by tests/onnx/seq_cases.py: expected outputs from onnxruntime 1.16.3; sequence graph inputs and
# outputs as SequenceProto files) give no wrong answers and every case listed in
# seq_cases_pass.txt passes; each model of tests/onnx/seq_bad is refused with the error
# expected.txt names. Skips (77) without ONNX support in the build.
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
exit $fail
