#!/bin/sh
# oar export --dtype bf16|fp16 (docs/amp.md): the tiny model trained on the UCI digits, exported in
# f32 and with bf16 and fp16 weights (the program under autocast O2, f32 input and logits); oar infer
# runs each on 64 test digits: the low-precision programs predict (nearly) the f32 program's classes
# and their weight files are about half the size; bad combinations are refused with the remedy.
# Usage: export_amp.sh OAR_BINARY SHARED_DIR
set -eu
oar=$1
shared=$2
if [ ! -f "$shared/data/sklearn/digits_test.csv" ]; then
  echo "export_amp: skipped: $shared/data/sklearn not found"
  exit 77
fi
if ! command -v python3 > /dev/null 2>&1; then
  echo "export_amp: skipped: python3 not found (it writes the .npy input)"
  exit 77
fi
export OAR_SHARED_DIR=$shared
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$oar" train --model tiny --data digits --batch 32 --seed 3 --threads 1 --workers 1 --quiet --epochs 3 \
  --checkpoint "$dir/tiny.safetensors" > /dev/null
# 64 test digits scaled as oar train does (pixels / 16), as an f32 .npy (python3's standard library)
python3 - "$shared/data/sklearn/digits_test.csv" "$dir/x.npy" <<'PY'
import struct, sys
rows = [line.strip().split(",") for line in open(sys.argv[1]).readlines()[1:65]]
values = [float(v) / 16.0 for r in rows for v in r[:64]]
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 64), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(sys.argv[2], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
    f.write(struct.pack("<%df" % len(values), *values))
PY
"$oar" export --model tiny --checkpoint "$dir/tiny.safetensors" --out "$dir/f32" > /dev/null
"$oar" infer "$dir/f32" --input "$dir/x.npy" --rows 64 > "$dir/f32.log"
want=$(sed -n 's/.*argmax of rows 0\.\.63: //p' "$dir/f32.log")
test -n "$want"
for dt in bf16 fp16; do
  "$oar" export --model tiny --checkpoint "$dir/tiny.safetensors" --out "$dir/$dt" --dtype $dt > "$dir/export-$dt.log"
  grep -q "weights in $( [ $dt = fp16 ] && echo f16 || echo bf16 )" "$dir/export-$dt.log"
  grep -q "output 'logits' f32\[?, 10\]" "$dir/export-$dt.log"
  grep -q '"cast"' "$dir/$dt.json" || { echo "export_amp: no cast node in the $dt program"; exit 1; }
  "$oar" infer "$dir/$dt" --input "$dir/x.npy" --rows 64 > "$dir/$dt.log"
  grep -q "output 'logits': f32\[64, 10\]" "$dir/$dt.log"
  got=$(sed -n 's/.*argmax of rows 0\.\.63: //p' "$dir/$dt.log")
  same=$(python3 -c "import sys; a, b = sys.argv[1].split(), sys.argv[2].split(); print(sum(x == y for x, y in zip(a, b)))" "$want" "$got")
  test "$same" -ge 60 || { echo "export_amp: $dt predicts $same of 64 classes as f32 does"; exit 1; }
  small=$(wc -c < "$dir/$dt.safetensors")
  big=$(wc -c < "$dir/f32.safetensors")
  test $((small * 10)) -lt $((big * 6)) || { echo "export_amp: $dt weights $small bytes, f32 $big"; exit 1; }
done
if "$oar" export --model tiny --checkpoint "$dir/tiny.safetensors" --out "$dir/x" --dtype f64 2> "$dir/err.log"; then exit 1; fi
grep -q "unknown --dtype 'f64'; expected f32, bf16 or fp16" "$dir/err.log"
if "$oar" export --format onnx --model tiny --checkpoint "$dir/tiny.safetensors" --out "$dir/x.onnx" --dtype bf16 2> "$dir/err.log"; then exit 1; fi
grep -q "is for --format oar" "$dir/err.log"
echo "export_amp: ok"
