#!/bin/sh
# oar quantize on a token model: lstm-lm trained briefly on the first 200 kB of Jane Austen's
# text (../shared/data/text/austen.txt; bytes), quantized dynamically (its 2-layer LSTM and its
# decoder int8): the LSTM is listed with its weights, and the test loss (cross-entropy per
# token) stays within 0.05 nats of fp32's; --out is refused for token models.
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
if "$oar" quantize --model lstm-lm --data "$dir/austen200k.txt" --checkpoint "$dir/lm.safetensors" --method dynamic \
  --out "$dir/q" 2> "$dir/err.log" > /dev/null; then exit 1; fi
grep -q "takes tokens" "$dir/err.log"
echo "quantize_lstm: ok"
