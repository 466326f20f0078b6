#!/bin/sh
# CPU time per call of int8 inference, oar and PyTorch, 1 thread: a measure that a loaded
# machine disturbs far less than wall time (the other processes' time is not counted). Each
# program runs twice, with C1 and C2 calls per repeat (1 repeat after 1 warm-up repeat, so
# 2*C calls); user + system time of the difference divided by the extra calls, so setup
# (import, model building, quantization, export) cancels out. Prints one JSON line per case.
# Usage: bench/quant_cpu_time.sh [BUILD_DIR] [MODELS] [PAIRS]
#   MODELS: default "lstm-lm gpt-mini"; PAIRS: how many C1/C2 pairs per case (default 3; each
#   pair gives one estimate, all are printed)
set -eu
build=${1:-build}
models=${2:-lstm-lm gpt-mini}
pairs=${3:-3}
here=$(dirname "$0")
cpu() { /usr/bin/time -f "%U %S" "$@" 2>&1 >/dev/null | grep -v "^W20\|^WARNING" | tail -1 | awk '{print $1 + $2}'; }
for model in $models; do
  quants="none dynamic"
  case $model in lenet|mlp|resnet20) quants="none dynamic static";; esac
  for batch in 1 32; do
    if [ $batch = 1 ]; then c1=10; c2=40; else c1=1; c2=4; fi
    for quant in $quants; do
      for fw in oar torch; do
        est=
        for p in $(seq "$pairs"); do
          if [ $fw = oar ]; then
            run() { cpu "$build/oar" bench --workload quant-infer --model $model --quant $quant --batch $batch --threads 1 --repeats 1 --calls "$1"; }
          else
            run() { cpu /usr/bin/python3 "$here/quant_torch.py" --model $model --quant $quant --batch $batch --threads 1 --repeats 1 --calls "$1"; }
          fi
          a=$(run $c1); b=$(run $c2)
          est="$est $(python3 -c "import sys; print(round(1e3 * (float(sys.argv[2]) - float(sys.argv[1])) / (2 * ($c2 - $c1)), 3))" "$a" "$b")"
        done
        python3 -c "
import json, sys
v = sorted(float(x) for x in sys.argv[5].split())
print(json.dumps({'framework': sys.argv[1], 'model': sys.argv[2], 'batch': int(sys.argv[3]), 'quant': sys.argv[4],
                  'cpu_ms_per_call': v[len(v) // 2], 'estimates': v}))" $fw $model $batch $quant "$est"
      done
    done
  done
done
