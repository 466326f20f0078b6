#!/bin/sh
# The profiler through the oar command: `oar profile --workload` in both modes, and
# `oar train --profile timer|full` on a short run (the timer table, the op table, the trace).
# Usage: profile.sh OAR_BINARY SHARED_DIR
set -eu
oar=$1
shared=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$oar" profile --workload tiny --steps 3 --warmup 1 --dir "$dir/p" > "$dir/p.log"
for s in "reader_cost" "batch_cost" "ips" "reader_ratio" "Overview: 3 steps" "Operators:" "Kernels:" \
         "Memory: CPU allocator" "trace: $dir/p/oar-trace-"; do
  grep -q "$s" "$dir/p.log" || { echo "profile: '$s' missing from oar profile's output"; cat "$dir/p.log"; exit 1; }
done
trace=$(ls "$dir"/p/oar-trace-*.json)
head -c 15 "$trace" | grep -q '^{"traceEvents":'
tail -c 40 "$trace" | grep -q '"displayTimeUnit":"ms"}'

"$oar" profile --workload tiny --mode timer --steps 3 --sort calls > "$dir/t.log"
grep -q "batch_cost" "$dir/t.log"
if grep -q "Operators:" "$dir/t.log"; then echo "profile: timer mode printed an op table"; exit 1; fi
if "$oar" profile --workload nosuch 2> "$dir/err.log"; then exit 1; fi
grep -q "unknown workload 'nosuch'" "$dir/err.log"

if [ ! -f "$shared/data/sklearn/digits_train.csv" ]; then
  echo "profile: 1 passed, 0 failed (oar train part skipped: $shared/data/sklearn not found)"
  exit 0
fi
export OAR_SHARED_DIR=$shared
common="--model tiny --data digits --epochs 2 --steps 30 --threads 1 --quiet --checkpoint $dir/c.safetensors"
"$oar" train $common --profile timer > "$dir/train-timer.log"
grep -q "oar profiler: timer over 25 steps (5 to 29)" "$dir/train-timer.log" || { cat "$dir/train-timer.log"; exit 1; }
grep -q "samples/s" "$dir/train-timer.log"
"$oar" train $common --profile full --profile-dir "$dir/tr" --profile-steps 3:8 > "$dir/train-full.log"
grep -q "Overview: 5 steps" "$dir/train-full.log"
grep -q "Operators:" "$dir/train-full.log"
grep -q "^  linear " "$dir/train-full.log"
ls "$dir"/tr/oar-trace-*.json > /dev/null
if "$oar" train $common --profile bogus 2> "$dir/err.log"; then exit 1; fi
grep -q "expected timer or full" "$dir/err.log"
echo "profile: 2 passed, 0 failed"
