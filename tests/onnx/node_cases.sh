#!/bin/sh
# ONNX node cases of operators the shared conformance set lacks (Resize, If, Loop, sequences and
# optionals, the expanded SequenceMap; tests/onnx/node_cases,
# written by tests/onnx/node_cases.py from the onnx package's own cases, expected outputs from
# ONNX's numpy reference), through `oar onnx-test`: no wrong answers, and every case listed in
# node_cases_pass.txt passes. Skips (77) without ONNX support in the build.
# Usage: node_cases.sh OAR_BINARY SOURCE_DIR
set -eu
oar=$1
src=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
. "$src/tests/onnx/cases_lib.sh"
run_cases onnx_node_cases node_cases
exit $fail
