#!/bin/sh
# ONNX operator conformance (issue 18): every case of ../shared/conformance/onnx-node and
# onnx-pytorch through `oar onnx-test`. Fails if a case gives a wrong answer or an error other
# than "unsupported" (unsupported must never be a wrong answer), or if a case listed in
# expected_pass.txt stops passing (the committed floor; regenerate it with --write-expect when
# more cases pass). Skips (77) without ../shared or without ONNX support in the build.
# Usage: conformance.sh OAR_BINARY SHARED_DIR EXPECTED_PASS_FILE
set -eu
oar=$1
conf=$2/conformance
expect=$3
if [ ! -d "$conf/onnx-node" ] || [ ! -d "$conf/onnx-pytorch" ]; then
  echo "onnx_conformance: skipped: $conf/onnx-node and onnx-pytorch not found (the shared data directory is absent)"
  exit 77
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
"$oar" onnx-test "$conf/onnx-node" "$conf/onnx-pytorch" --expect "$expect" > "$out" 2>&1
rc=$?
set -e
if grep -q "built without protobuf-c" "$out"; then
  echo "onnx_conformance: skipped: oar was built without protobuf-c (no ONNX import)"
  exit 77
fi
# the per-operator table and the totals
sed -n '/^operator /,$p' "$out"
if grep -q "^FAIL" "$out"; then
  echo "onnx_conformance: cases gave wrong answers or failed (expected: pass, or refused as unsupported):"
  grep "^FAIL" "$out"
  exit 1
fi
if [ "$rc" -ne 0 ]; then
  grep "REGRESSION" "$out" || cat "$out"
  exit 1
fi
