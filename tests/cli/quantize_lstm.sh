#!/bin/sh
# oar quantize on a token model: lstm-lm trained briefly on the first 200 kB of Jane Austen's
# text (../shared/data/text/austen.txt; bytes), quantized dynamically (its 2-layer LSTM and its
# decoder int8): the LSTM is listed with its weights, and the test loss (cross-entropy per
# token) stays within 0.05 nats of fp32's, with 8-bit weights and with the 7-bit ones picked at the
# AVX2 cap. With --out the quantized lstm-lm and gpt-mini are written
# as programs of token ids [N, T] to logits [N, T, 256]: the command checks the file in the
# predictor against the module in process (equal here), and `oar infer` runs it on an .npy of
# ids; --method static and qat are refused for token models.
# Usage: quantize_lstm.sh OAR_BINARY SHARED_DIR
set -eu
oar=$1
shared=$2
text=$shared/data/text/austen.txt
if [ ! -f "$text" ]; then
  echo "quantize_lstm: skipped: $text not found"
  exit 0
fi
if ! command -v python3 > /dev/null 2>&1; then
  echo "quantize_lstm: skipped: python3 not found (it reads the JSON)"
  exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
head -c 200000 "$text" > "$dir/austen200k.txt"
"$oar" train --model lstm-lm --data "$dir/austen200k.txt" --epochs 1 --steps 60 --batch 16 --optimizer adam \
  --lr 0.003 --seed 1 --threads 2 --quiet --checkpoint "$dir/lm.safetensors" > "$dir/train.log"
"$oar" quantize --model lstm-lm --data "$dir/austen200k.txt" --checkpoint "$dir/lm.safetensors" --method dynamic \
  --batch 16 --threads 2 > "$dir/dynamic.log"
grep -q "rnn        LSTM        640000" "$dir/dynamic.log" || { cat "$dir/dynamic.log"; exit 1; }
grep -q "dec        Linear       51200" "$dir/dynamic.log"
grep -q "perplexity" "$dir/dynamic.log"
tail -1 "$dir/dynamic.log" | python3 -c "
import json, sys
r = json.load(sys.stdin)
q = r['results'][0]
assert q['quant'] == 'dynamic' and abs(q['loss'] - q['fp32_loss']) <= 0.05, q
assert q['bytes'] * 2 < r['fp32_bytes'], (q, r['fp32_bytes'])
"
# at the AVX2 cap (a CPU without VNNI) the command picks 7-bit weights by itself and says so; the
# loss stays within the same 0.05 nats
OAR_CPU_ISA=avx2 "$oar" quantize --model lstm-lm --data "$dir/austen200k.txt" --checkpoint "$dir/lm.safetensors" \
  --method dynamic --batch 16 --threads 2 > "$dir/dynamic7.log"
grep -q "weights in 7 bits (this CPU's fast exact int8)" "$dir/dynamic7.log" || { cat "$dir/dynamic7.log"; exit 1; }
tail -1 "$dir/dynamic7.log" | python3 -c "
import json, sys
r = json.load(sys.stdin)
q = r['results'][0]
assert r['weight_bits'] == 7 and abs(q['loss'] - q['fp32_loss']) <= 0.05, (r['weight_bits'], q)
"
"$oar" quantize --model lstm-lm --data "$dir/austen200k.txt" --checkpoint "$dir/lm.safetensors" --method dynamic \
  --batch 16 --threads 2 --out "$dir/q" > "$dir/out.log"
head -c 60000 "$text" > "$dir/austen60k.txt"
"$oar" train --model gpt-mini --data "$dir/austen60k.txt" --epochs 1 --steps 2 --batch 4 --optimizer adamw \
  --lr 0.001 --seed 1 --threads 2 --quiet --checkpoint "$dir/gpt.safetensors" > "$dir/train-gpt.log"
"$oar" quantize --model gpt-mini --data "$dir/austen60k.txt" --checkpoint "$dir/gpt.safetensors" --method dynamic \
  --batch 16 --threads 2 --out "$dir/q" > "$dir/out-gpt.log"
for f in out out-gpt; do
  grep -q "exported to $dir/q/" "$dir/$f.log" || { cat "$dir/$f.log"; exit 1; }
  tail -1 "$dir/$f.log" | python3 -c "
import json, sys
q = json.load(sys.stdin)['results'][0]
assert q['out_max_abs_diff'] == 0, q
"
done
# an .npy of 3 sequences of token ids: lstm-lm takes windows of 35, gpt-mini of 128
python3 - "$dir" <<'PY'
import struct, sys
for n, t, name in [(3, 35, "ids35"), (2, 128, "ids128")]:
    ids = [(i * 7 + 3) % 256 for i in range(n * t)]
    h = "{'descr': '<i8', 'fortran_order': False, 'shape': (%d, %d), }" % (n, t)
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    with open("%s/%s.npy" % (sys.argv[1], name), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode("latin1"))
        f.write(struct.pack("<%dq" % (n * t), *ids))
PY
"$oar" infer "$dir/q/lstm-lm-dynamic" --input "$dir/ids35.npy" > "$dir/infer.log"
grep -q "output 'logits': f32\[3, 35, 256\]" "$dir/infer.log" || { cat "$dir/infer.log"; exit 1; }
"$oar" infer "$dir/q/gpt-mini-dynamic" --input "$dir/ids128.npy" > "$dir/infer-gpt.log"
grep -q "output 'logits': f32\[2, 128, 256\]" "$dir/infer-gpt.log" || { cat "$dir/infer-gpt.log"; exit 1; }
if "$oar" quantize --model lstm-lm --data "$dir/austen200k.txt" --checkpoint "$dir/lm.safetensors" --method static \
  --batch 16 2> "$dir/err.log" > /dev/null; then exit 1; fi
grep -q "expected an image or feature model for --method static.*got lstm-lm, which takes tokens; use --method dynamic" \
  "$dir/err.log"
echo "quantize_lstm: ok"
