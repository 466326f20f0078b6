#!/bin/sh
# Export and inference through the command: LeNet trained for a few steps on Fashion-MNIST is
# exported with a dynamic batch (traced at 2), run by `oar infer` on 32 test images (a .npy made
# here with python3's standard library: no numpy needed), and described by `oar inspect`.
# Usage: export_infer.sh OAR_BINARY SHARED_DIR
set -eu
oar=$1
shared=$2
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then data=$shared/data/fashion-mnist; fi
if [ ! -f "$data/t10k-images-idx3-ubyte.gz" ]; then
  echo "export_infer: skipped: Fashion-MNIST not found in /usr/share/datasets/fashion-mnist nor $shared/data"
  exit 0
fi
if ! command -v python3 > /dev/null 2>&1; then
  echo "export_infer: skipped: python3 not found (it writes the .npy input)"
  exit 0
fi
export OAR_SHARED_DIR=$shared
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$oar" train --model lenet --data fashion-mnist --epochs 1 --steps 150 --seed 1 --threads 2 --quiet \
  --checkpoint "$dir/lenet.safetensors" > "$dir/train.log"
cp "$dir/lenet.safetensors" "$dir/ckpt.safetensors" # (the export to lenet below replaces lenet.safetensors)
# (before the export to lenet below replaces the checkpoint lenet.safetensors)
# --out with .json names the same two files (not lenet2.json.json)
"$oar" export --model lenet --checkpoint "$dir/lenet.safetensors" --out "$dir/lenet2.json" --batch 2 > "$dir/export2.log"
grep -q "to $dir/lenet2.json and $dir/lenet2.safetensors" "$dir/export2.log"
test -s "$dir/lenet2.json" && test -s "$dir/lenet2.safetensors" && test ! -e "$dir/lenet2.json.json"
"$oar" export --model lenet --checkpoint "$dir/lenet.safetensors" --out "$dir/lenet" --batch 2 > "$dir/export.log"
grep -q "input  'images' f32\[?, 1, 28, 28\]" "$dir/export.log"
grep -q "output 'logits' f32\[?, 10\]" "$dir/export.log"
test -s "$dir/lenet.json"
test -s "$dir/lenet.safetensors"

# 32 test images, normalized as oar train does, as f32 .npy; their labels one per line
python3 - "$data" "$dir" <<'PY'
import gzip, struct, sys
data, out = sys.argv[1], sys.argv[2]
n = 32
with gzip.open(data + "/t10k-images-idx3-ubyte.gz") as f:
    magic, count, rows, cols = struct.unpack(">IIII", f.read(16))
    pixels = f.read(n * rows * cols)
with gzip.open(data + "/t10k-labels-idx1-ubyte.gz") as f:
    f.read(8)
    labels = f.read(n)
values = [(p / 255.0 - 0.2860) / 0.3530 for p in pixels]
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 1, %d, %d), }" % (n, rows, cols)
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(out + "/x.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
    f.write(struct.pack("<%df" % len(values), *values))
with open(out + "/labels.txt", "w") as f:
    f.write(" ".join(str(b) for b in labels) + "\n")
PY

# the batch of 32 runs on the program traced at 2 (dynamic dim)
"$oar" infer "$dir/lenet.json" --input "$dir/x.npy" --output "$dir/y.npy" --rows 32 > "$dir/infer.log"
"$oar" infer "$dir/lenet2" --input "$dir/x.npy" > /dev/null
grep -q "output 'logits': f32\[32, 10\]" "$dir/infer.log"
test -s "$dir/y.npy"
# the predicted classes match the labels well above chance (10%)
pred=$(sed -n 's/.*argmax of rows 0\.\.31: //p' "$dir/infer.log")
right=$(python3 -c "import sys; p, l = sys.argv[1].split(), sys.argv[2].split(); print(sum(a == b for a, b in zip(p, l)))" \
  "$pred" "$(cat "$dir/labels.txt")")
test "$right" -ge 16
# on the GPU (a predictor on CUDA replaying graphs): the same classes; without one, a clear refusal
if "$oar" infer "$dir/lenet" --input "$dir/x.npy" --rows 32 --device cuda > "$dir/infer-gpu.log" 2> "$dir/err.log"; then
  test "$(sed -n 's/.*argmax of rows 0\.\.31: //p' "$dir/infer-gpu.log")" = "$pred"
else
  grep -q -e "no cuda device" -e "no cuda support" "$dir/err.log" || { cat "$dir/err.log"; exit 1; }
fi
# the saved output: f32 [32, 10]
python3 -c "import sys; h = open(sys.argv[1], 'rb').read(128).decode('latin1'); sys.exit(not ('<f4' in h and '(32, 10)' in h))" \
  "$dir/y.npy"

# ONNX (--format onnx): the same model as an ONNX file, run by oar infer with the same bits as the
# oar model file; a model file exported with --from (its NHWC convolutions refused by name)
"$oar" export --format onnx --model lenet --checkpoint "$dir/ckpt.safetensors" --out "$dir/lenet.onnx" \
  > "$dir/export-onnx.log"
grep -q "to $dir/lenet.onnx (ONNX, opset 17)" "$dir/export-onnx.log"
"$oar" infer "$dir/lenet.onnx" --input "$dir/x.npy" --output "$dir/y-onnx.npy" > /dev/null
cmp "$dir/y.npy" "$dir/y-onnx.npy"
if "$oar" export --format onnx --from "$dir/lenet" --out "$dir/from.onnx" 2> "$dir/err.log"; then
  "$oar" infer "$dir/from.onnx" --input "$dir/x.npy" --output "$dir/y-from.npy" > /dev/null
  cmp "$dir/y.npy" "$dir/y-from.npy"
else
  grep -q "conv2d_act): the NHWC layout" "$dir/err.log"
  test ! -e "$dir/from.onnx"
fi
if "$oar" export --format tflite --model lenet --checkpoint "$dir/ckpt.safetensors" --out "$dir/l" 2> "$dir/err.log"; then exit 1; fi
grep -q "expected --format oar or onnx, got 'tflite'" "$dir/err.log"

# inspect: names, dynamic dims, ops, passes; the model named with or without .json
"$oar" inspect "$dir/lenet.json" > "$dir/inspect-json.log"
grep -q "images *f32\[?, 1, 28, 28\]" "$dir/inspect-json.log"
"$oar" inspect "$dir/lenet" --passes > "$dir/inspect.log"
grep -q "images *f32\[?, 1, 28, 28\]" "$dir/inspect.log"
grep -q "logits" "$dir/inspect.log"
for op in conv2d max_pool2d relu linear reshape dead_code inplace; do grep -q "$op" "$dir/inspect.log"; done

# refusals, with messages
python3 - "$dir/bad.npy" <<'PY'
import struct, sys
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 28, 28), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
    f.write(bytes(4 * 2 * 3 * 28 * 28))
PY
if "$oar" infer "$dir/lenet" --input "$dir/bad.npy" 2> "$dir/err.log"; then exit 1; fi
grep -q "input 'images' expects f32\[?, 1, 28, 28\]" "$dir/err.log"
if "$oar" infer "$dir/missing" --input "$dir/x.npy" 2> "$dir/err.log"; then exit 1; fi
grep -q "missing.json" "$dir/err.log"
if "$oar" export --model lstm-lm --checkpoint "$dir/lenet.safetensors" --out "$dir/l" 2> "$dir/err.log"; then exit 1; fi
grep -q "lstm-lm is not supported" "$dir/err.log"
echo "export_infer: 1 passed, 0 failed ($right of 32 test images right)"
