#!/bin/sh
# AMP beside f32, in one run: `oar bench` f32 and --amp O1 (bf16), and PyTorch 1.13 f32 and CPU
# autocast (bf16) on the same workloads and threads. One JSON line per run; REPS runs of each.
# Usage: bench/amp_compare.sh OAR_BINARY [WORKLOADS] [THREADS] [REPS] [MODES]
# MODES: oar's step modes to time, "eager" (default) and/or "static" (compiled); PyTorch runs eager.
# TORCH_STEPS: PyTorch's timed steps (default: its per-workload count; gpt takes minutes on 2 cores).
set -eu
oar=$1
workloads=${2:-"lenet resnet20 gpt-mini"}
threads=${3:-2}
reps=${4:-3}
modes=${5:-eager}
torch_steps=${6:+--steps $6 --warmup 2}
here=$(dirname "$0")
torch_name() { case $1 in gpt-mini) echo gpt ;; lstm-lm) echo lstm ;; *) echo "$1" ;; esac; }
for w in $workloads; do
  for r in $(seq "$reps"); do
    for m in $modes; do
      "$oar" bench --workload "$w" --threads "$threads" --mode "$m" | tail -1
      "$oar" bench --workload "$w" --threads "$threads" --mode "$m" --amp O1 | tail -1
    done
    if [ -x /usr/bin/python3 ]; then
      out=$(mktemp)
      /usr/bin/python3 "$here/amp_torch.py" --workload "$(torch_name "$w")" --threads "$threads" $torch_steps --out "$out" 2> /dev/null &&
        sed 's/^{/{"torch": "f32", /' "$out"
      : > "$out"
      /usr/bin/python3 "$here/amp_torch.py" --workload "$(torch_name "$w")" --threads "$threads" $torch_steps --amp --out "$out" 2> /dev/null &&
        sed 's/^{/{"torch": "autocast bf16", /' "$out"
      rm -f "$out"
    fi
  done
done
