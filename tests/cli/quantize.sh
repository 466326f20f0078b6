#!/bin/sh
# oar quantize end to end: LeNet trained briefly on Fashion-MNIST, quantized dynamically
# (within a point of fp32 accuracy), by a short quantization-aware fine-tune (within half a
# point, the int8 program run by `oar infer`) and statically as a program (minmax; within half a point,
# evaluated in the predictor, per-layer output SQNR printed, about 4x smaller); the static int8 program exported by --out runs in `oar infer` and still predicts the
# labels; bad requests are refused with a message.
# Usage: quantize.sh OAR_BINARY SHARED_DIR
set -eu
oar=$1
shared=$2
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then data=$shared/data/fashion-mnist; fi
if [ ! -f "$data/t10k-images-idx3-ubyte.gz" ]; then
  echo "quantize: skipped: Fashion-MNIST not found in /usr/share/datasets/fashion-mnist nor $shared/data"
  exit 0
fi
if ! command -v python3 > /dev/null 2>&1; then
  echo "quantize: skipped: python3 not found (it writes the .npy input and reads the JSON)"
  exit 0
fi
export OAR_SHARED_DIR=$shared
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$oar" train --model lenet --data fashion-mnist --epochs 1 --steps 200 --seed 1 --threads 2 --quiet \
  --checkpoint "$dir/lenet.safetensors" > "$dir/train.log"
"$oar" quantize --model lenet --data fashion-mnist --checkpoint "$dir/lenet.safetensors" --method dynamic \
  --threads 2 > "$dir/dynamic.log"
# one observer here (each evaluation of the test set is slow under the sanitizers): every kind
# is checked in test_quant, and `--observer all` gives the table of docs/quant.md
"$oar" quantize --model lenet --data fashion-mnist --checkpoint "$dir/lenet.safetensors" --method static \
  --calib 4 --threads 2 --out "$dir/q" > "$dir/static.log"
grep -q "f1         Linear       48000" "$dir/dynamic.log"
grep -q "c2         Conv2d        2400" "$dir/static.log"
grep -q "output SQNR" "$dir/static.log"
# accuracy within 1 point for dynamic and 0.5 for static minmax (the int8 program in the
# predictor); ~4x smaller
for f in dynamic static; do
  tail -1 "$dir/$f.log" | python3 -c "
import json, sys
r = json.load(sys.stdin)
for q in r['results']:
    drop = r['fp32_accuracy'] - q['accuracy']
    assert drop <= (0.01 if q['quant'] == 'dynamic' else 0.005), (q, r['fp32_accuracy'])
    assert q['bytes'] * 3 < r['fp32_bytes'] or q['quant'] == 'dynamic', q
"
done
test -s "$dir/q/lenet-static-minmax.json" && test -s "$dir/q/lenet-static-minmax.safetensors"

# the exported int8 program in the predictor: 32 test images
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
# quantization-aware training: a short fine-tune (100 steps) with fake quant, then the int8
# program (within half a point of fp32, ~4x smaller), which `oar infer` runs as well
"$oar" quantize --model lenet --data fashion-mnist --checkpoint "$dir/lenet.safetensors" --method qat \
  --steps 100 --calib 2 --threads 2 --out "$dir/q" > "$dir/qat.log"
grep -q "after 100 QAT steps: fake-quant test accuracy" "$dir/qat.log"
grep -q "f1         Linear       48000" "$dir/qat.log"
tail -1 "$dir/qat.log" | python3 -c "
import json, sys
r = json.load(sys.stdin)
q = r['results'][0]
assert q['quant'] == 'qat' and q['qat_steps'] == 100, q
assert r['fp32_accuracy'] - q['accuracy'] <= 0.005, (q, r['fp32_accuracy'])
assert abs(q['accuracy'] - q['fake_quant_accuracy']) <= 0.002, q
assert q['bytes'] * 3 < r['fp32_bytes'], q
"
# with LSQ: the input scales become learnable after 10% of the steps, compiled step
"$oar" quantize --model lenet --data fashion-mnist --checkpoint "$dir/lenet.safetensors" --method qat --lsq \
  --mode static --steps 50 --calib 1 --threads 2 > "$dir/lsq.log"
grep -q "qat: step 5: 5 input scales learnable from here (LSQ)" "$dir/lsq.log"
tail -1 "$dir/lsq.log" | python3 -c "
import json, sys
r = json.load(sys.stdin)
assert r['fp32_accuracy'] - r['results'][0]['accuracy'] <= 0.005, r
"
# 7-bit weights (the CPUs without VNNI) and 7-bit activations (--reduce-range) through QAT and
# static PTQ: still within half a point, the 7-bit program written
"$oar" quantize --model lenet --data fashion-mnist --checkpoint "$dir/lenet.safetensors" --method qat --weight-bits 7 \
  --reduce-range --steps 50 --calib 1 --threads 2 > "$dir/qat7.log"
"$oar" quantize --model lenet --data fashion-mnist --checkpoint "$dir/lenet.safetensors" --method static \
  --weight-bits 7 --reduce-range --calib 2 --threads 2 > "$dir/static7.log"
grep -q "activations in 7 bits" "$dir/qat7.log"
grep -q "zero point 64" "$dir/qat7.log"
for f in qat7 static7; do
  tail -1 "$dir/$f.log" | python3 -c "
import json, sys
r = json.load(sys.stdin)
assert r['weight_bits'] == 7 and r['reduce_range'] is True, r
assert r['fp32_accuracy'] - r['results'][0]['accuracy'] <= 0.005, r
"
done
"$oar" infer "$dir/q/lenet-qat" --input "$dir/x.npy" --rows 32 > "$dir/infer-qat.log"
grep -q "output 'logits': f32\[32, 10\]" "$dir/infer-qat.log"

"$oar" infer "$dir/q/lenet-static-minmax" --input "$dir/x.npy" --rows 32 > "$dir/infer.log"
grep -q "output 'logits': f32\[32, 10\]" "$dir/infer.log"
pred=$(sed -n 's/.*argmax of rows 0\.\.31: //p' "$dir/infer.log")
right=$(python3 -c "import sys; p, l = sys.argv[1].split(), sys.argv[2].split(); print(sum(a == b for a, b in zip(p, l)))" \
  "$pred" "$(cat "$dir/labels.txt")")
test "$right" -ge 16
"$oar" inspect "$dir/q/lenet-static-minmax" > "$dir/inspect.log"
for op in quantize qconv2d qlinear; do grep -q "$op" "$dir/inspect.log"; done
# the static int8 program exported as ONNX (QDQ) and imported again runs on the int8 ops with the
# same bits (src/io/onnx/onnx_qdq.c; docs/onnx.md), where the build has ONNX
if "$oar" export --format onnx --from "$dir/q/lenet-static-minmax" --out "$dir/q.onnx" > "$dir/export.log" 2>&1; then
  "$oar" infer "$dir/q/lenet-static-minmax" --input "$dir/x.npy" --output "$dir/y_model.npy" > /dev/null
  "$oar" infer "$dir/q.onnx" --input "$dir/x.npy" --output "$dir/y_onnx.npy" > /dev/null
  cmp "$dir/y_model.npy" "$dir/y_onnx.npy"
else
  grep -q "protobuf-c" "$dir/export.log" || { cat "$dir/export.log"; exit 1; }
fi

# refusals
if "$oar" quantize --model lenet --checkpoint "$dir/lenet.safetensors" --method fancy 2> "$dir/err.log"; then exit 1; fi
grep -q "expected --method dynamic, static or qat" "$dir/err.log"
if "$oar" quantize --model lenet --checkpoint "$dir/lenet.safetensors" --method qat --epochs 0 2> "$dir/err.log"; then
  exit 1
fi
grep -q "epochs >= 1.*got --method qat, --calib 8, --epochs 0" "$dir/err.log"
if "$oar" quantize --model lenet --checkpoint "$dir/lenet.safetensors" --method qat --weight-bits 6 2> "$dir/err.log"; then
  exit 1
fi
grep -q "expected --weight-bits 8 or 7, got 6" "$dir/err.log"
if "$oar" quantize --model lenet --checkpoint "$dir/lenet.safetensors" --method dynamic --reduce-range \
  2> "$dir/err.log"; then exit 1; fi
grep -q "expected --reduce-range with --method static or qat, got it with --method dynamic" "$dir/err.log"
# ConvBn-fused QAT needs a conv followed by its BatchNorm (LeNet has none); --freeze-bn needs --fuse-bn
if "$oar" quantize --model lenet --data fashion-mnist --checkpoint "$dir/lenet.safetensors" --method qat --fuse-bn \
  --steps 2 --calib 1 2> "$dir/err.log" > /dev/null; then exit 1; fi
grep -q "expected (for fuse_bn) a Conv2d followed by a BatchNorm2d of its output channels" "$dir/err.log"
if "$oar" quantize --model lenet --checkpoint "$dir/lenet.safetensors" --method qat --freeze-bn 5 2> "$dir/err.log"; then
  exit 1
fi
grep -q "expected --freeze-bn N >= 1 together with --fuse-bn" "$dir/err.log"
if "$oar" quantize --model lenet --checkpoint "$dir/lenet.safetensors" --method static --fuse-bn 2> "$dir/err.log"; then
  exit 1
fi
grep -q "expected --fuse-bn and --freeze-bn with --method qat" "$dir/err.log"
if "$oar" quantize --model lenet --data fashion-mnist --checkpoint "$dir/lenet.safetensors" --method static \
  --observer entropy --calib 1 2> "$dir/err.log" > /dev/null; then exit 1; fi
grep -q "observer: expected kind minmax, moving_average, percentile, kl or mse, got 'entropy'" "$dir/err.log"
printf 'not a checkpoint' > "$dir/bad.safetensors"
if "$oar" quantize --model lenet --data fashion-mnist --checkpoint "$dir/bad.safetensors" --method dynamic \
  2> "$dir/err.log" > /dev/null; then exit 1; fi
grep -q "bad.safetensors" "$dir/err.log"
# a damaged int8 model file: truncated, or its last bytes zeroed (the scales): named and refused
q=$dir/q/lenet-static-minmax
head -c 3000 "$q.safetensors" > "$dir/q/cut.safetensors"; cp "$q.json" "$dir/q/cut.json"
if "$oar" infer "$dir/q/cut" --input "$dir/x.npy" 2> "$dir/err.log" > /dev/null; then exit 1; fi
grep -q "cut.safetensors': tensor '.*' *: *data_offsets\|cut.safetensors': tensor '.*': data_offsets" "$dir/err.log"
python3 -c "import sys; d = open(sys.argv[1], 'rb').read(); open(sys.argv[2], 'wb').write(d[:-50] + bytes(50))" \
  "$q.safetensors" "$dir/q/flip.safetensors"
cp "$q.json" "$dir/q/flip.json"
if "$oar" infer "$dir/q/flip" --input "$dir/x.npy" 2> "$dir/err.log" > /dev/null; then exit 1; fi
grep -q "flip.safetensors': tensor '[a-z0-9_.]*' is damaged" "$dir/err.log"
echo "quantize: ok"
