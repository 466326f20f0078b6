#!/bin/sh
# CPU time per training step (user + sys, from getrusage via /usr/bin/time) of oar f32 and --amp
# O1 (eager and compiled) and PyTorch 1.13 f32 and CPU autocast bf16, at one thread: the
# difference between a long and a short run divided by the extra steps, so setup, warm-up and
# compilation cancel. On a machine shared with other work, CPU time measures the work done
# where wall time measures the contention; it says nothing of parallel scaling.
# Usage: bench/amp_cpu_time.sh OAR_BINARY [WORKLOADS] [REPS] [AMP_LEVELS]. AMP_LEVELS: the oar
# levels timed besides f32 (default "O1"; "O1 O2" adds O2's bf16 parameters and f32 masters).
# One JSON line per measurement.
set -eu
oar=$1
workloads=${2:-"resnet20 gpt-mini mlp lstm-lm"}
reps=${3:-3}
levels=${4:-O1}
here=$(dirname "$0")
cpu() { /usr/bin/time -f "%U %S" "$@" 2>&1 >/dev/null | tail -1 | awk '{print $1 + $2}'; }
torch_name() { case $1 in gpt-mini) echo gpt ;; lstm-lm) echo lstm ;; *) echo "$1" ;; esac; }
per_step() { echo "$1 $2 $3" | awk '{printf "%.2f", ($2 - $1) * 1000 / $3}'; }
for w in $workloads; do
  case $w in gpt-mini) short=2 long=6 tshort=1 tlong=3 ;; *) short=3 long=13 tshort=2 tlong=7 ;; esac
  for r in $(seq "$reps"); do
    for m in eager static; do
      for amp in "" $(for l in $levels; do echo "--amp_$l"; done); do
        amp=$(echo "$amp" | tr _ ' ')
        a=$(cpu "$oar" bench --workload "$w" --threads 1 --mode "$m" --steps "$short" $amp)
        b=$(cpu "$oar" bench --workload "$w" --threads 1 --mode "$m" --steps "$long" $amp)
        echo "{\"who\": \"oar\", \"workload\": \"$w\", \"mode\": \"$m\", \"amp\": \"${amp:-f32}\", \"rep\": $r, \"cpu_ms_per_step\": $(per_step "$a" "$b" $((long - short)))}"
      done
    done
    if [ -x /usr/bin/python3 ]; then
      for amp in "" "--amp"; do
        t="$(torch_name "$w")"
        a=$(cpu /usr/bin/python3 "$here/amp_torch.py" --workload "$t" --threads 1 --steps "$tshort" --warmup 1 $amp)
        b=$(cpu /usr/bin/python3 "$here/amp_torch.py" --workload "$t" --threads 1 --steps "$tlong" --warmup 1 $amp)
        echo "{\"who\": \"torch\", \"workload\": \"$w\", \"mode\": \"eager\", \"amp\": \"${amp:-f32}\", \"rep\": $r, \"cpu_ms_per_step\": $(per_step "$a" "$b" $((tlong - tshort)))}"
      done
    fi
  done
done
