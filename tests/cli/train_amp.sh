#!/bin/sh
# oar train --amp end to end on the tiny model and the UCI digits: O1 bf16 learns as f32 does and
# its compiled step (--mode static) ends with the eager run's bytes; an O2 fp16 run (f32 masters,
# loss scaling) interrupted and resumed ends with the uninterrupted run's bytes, masters and
# scaler state included; the O2 fp16 and O1 fp16 runs compiled end with the eager runs' bytes
# (the scaler's skip inside the program); bad combinations are refused with the remedy.
# Usage: train_amp.sh OAR_BINARY SHARED_DIR
set -eu
oar=$1
shared=$2
if [ ! -f "$shared/data/sklearn/digits_train.csv" ]; then
  echo "train_amp: skipped: $shared/data/sklearn not found"
  exit 77
fi
export OAR_SHARED_DIR=$shared
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common="--model tiny --data digits --batch 32 --seed 3 --threads 1 --workers 1 --quiet --epochs 3"
"$oar" train $common --amp O1 --checkpoint "$dir/o1.safetensors" --metrics "$dir/o1.jsonl" > "$dir/o1.log"
grep -q "^amp: O1 bf16 (autocast; CPU path: " "$dir/o1.log"
acc=$(sed -n 's/.*"test_accuracy": \([0-9.]*\).*/\1/p' "$dir/o1.jsonl" | tail -1)
awk -v a="$acc" 'BEGIN { exit !(a > 0.75) }' || { echo "train_amp: O1 bf16 accuracy $acc"; exit 1; }
"$oar" train $common --amp O1 --mode static --checkpoint "$dir/o1s.safetensors" > /dev/null
cmp "$dir/o1.safetensors" "$dir/o1s.safetensors"

amp="--amp O2 --amp-dtype fp16"
"$oar" train $common $amp --checkpoint "$dir/full.safetensors" > "$dir/full.log"
grep -q "^amp: O2 f16, f32 master weights, dynamic loss scaling" "$dir/full.log"
"$oar" train $common $amp --steps 44 --checkpoint "$dir/part.safetensors" > /dev/null
"$oar" train $common $amp --checkpoint "$dir/part.safetensors" --resume > "$dir/resumed.log"
grep -q "resumed from" "$dir/resumed.log"
cmp "$dir/full.safetensors" "$dir/part.safetensors"
cmp "$dir/full.safetensors.scaler" "$dir/part.safetensors.scaler"
# the same O2 fp16 run compiled (the scaler's skip and the masters' sync inside the program) ends
# with the eager run's bytes; interrupted and resumed compiled, too
"$oar" train $common $amp --mode static --checkpoint "$dir/fulls.safetensors" > /dev/null
cmp "$dir/full.safetensors" "$dir/fulls.safetensors"
cmp "$dir/full.safetensors.scaler" "$dir/fulls.safetensors.scaler"
"$oar" train $common $amp --mode static --steps 44 --checkpoint "$dir/parts.safetensors" > /dev/null
"$oar" train $common $amp --mode static --checkpoint "$dir/parts.safetensors" --resume > /dev/null
cmp "$dir/full.safetensors" "$dir/parts.safetensors"
cmp "$dir/full.safetensors.scaler" "$dir/parts.safetensors.scaler"
# O1 fp16 (scaler only) compiled against eager
"$oar" train $common --amp O1 --amp-dtype fp16 --checkpoint "$dir/f16.safetensors" > /dev/null
"$oar" train $common --amp O1 --amp-dtype fp16 --mode static --checkpoint "$dir/f16s.safetensors" > /dev/null
cmp "$dir/f16.safetensors" "$dir/f16s.safetensors"
cmp "$dir/f16.safetensors.scaler" "$dir/f16s.safetensors.scaler"

refuse() { # expected message, then the options
  want=$1
  shift
  if "$oar" train --model tiny --data digits "$@" > "$dir/err.log" 2>&1; then echo "train_amp: accepted $*"; exit 1; fi
  grep -q -- "$want" "$dir/err.log" || { echo "train_amp: no '$want' in: $(cat "$dir/err.log")"; exit 1; }
}
refuse "unknown --amp 'O3'; expected O1 or O2" --amp O3
refuse "unknown --amp-dtype 'f64'; expected bf16 or fp16" --amp O1 --amp-dtype f64
refuse "--amp-dtype needs --amp O1 or O2" --amp-dtype bf16
echo "train_amp: ok"
