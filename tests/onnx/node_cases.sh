#!/bin/sh
# ONNX node cases of operators the shared conformance set lacks (Resize, If, Loop; tests/onnx/node_cases,
# written by tests/onnx/node_cases.py from the onnx package's own cases, expected outputs from
# ONNX's numpy reference), through `oar onnx-test`: no wrong answers, and every case listed in
# node_cases_pass.txt passes. Skips (77) without ONNX support in the build.
# Usage: node_cases.sh OAR_BINARY SOURCE_DIR
set -eu
oar=$1
src=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
"$oar" onnx-test "$src/tests/onnx/node_cases" --expect "$src/tests/onnx/node_cases_pass.txt" > "$out" 2>&1
rc=$?
set -e
if grep -q "built without protobuf-c" "$out"; then
  echo "onnx_node_cases: skipped: oar was built without protobuf-c (no ONNX import)"
  exit 77
fi
sed -n '/^operator /,$p' "$out"
if grep -q "^FAIL" "$out" || [ "$rc" -ne 0 ]; then
  grep "^FAIL\|REGRESSION" "$out" || cat "$out"
  exit 1
fi
