#!/bin/sh
# torchvision's SSDlite and Faster R-CNN exported by torch, run by `oar infer` (eagerly: they
# have NonZero and NonMaxSuppression) and compared with onnxruntime's stored outputs
# (tests/onnx/detection_check.py says how). Skips (77) without Debian's python3 with torch, or
# without ONNX support in the build.
# Usage: detection.sh OAR_BINARY SOURCE_DIR WORK_DIR (WORK_DIR keeps the exports for the ISA runs)
set -eu
oar=$1
src=$2
work=$3
py=/usr/bin/python3
if ! [ -x "$py" ]; then
  echo "onnx_detection: skipped: $py not found"
  exit 77
fi
if "$oar" onnx-test /nonexistent 2>&1 | grep -q "built without protobuf-c"; then
  echo "onnx_detection: skipped: oar was built without protobuf-c (no ONNX import)"
  exit 77
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$py" "$src/tests/onnx/detection_check.py" "$oar" "$work" "$src" 2> "$log" || {
  rc=$?
  grep -v "Warning\|warn(" "$log" | tail -20
  exit $rc
}
