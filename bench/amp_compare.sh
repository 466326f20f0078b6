#!/bin/sh
# AMP beside f32, in one run: `oar bench` f32 and --amp O1 (bf16), and PyTorch 1.13 f32 and CPU
# autocast (bf16) on the same workloads and threads. One JSON line per run; REPS runs of each.
# Usage: bench/amp_compare.sh OAR_BINARY [WORKLOADS] [THREADS] [REPS]
set -eu
oar=$1
workloads=${2:-"lenet resnet20 gpt-mini"}
threads=${3:-2}
reps=${4:-3}
here=$(dirname "$0")
torch_name() { case $1 in gpt-mini) echo gpt ;; *) echo "$1" ;; esac; }
for w in $workloads; do
  for r in $(seq "$reps"); do
    "$oar" bench --workload "$w" --threads "$threads" | tail -1
    "$oar" bench --workload "$w" --threads "$threads" --amp O1 | tail -1
    if [ -x /usr/bin/python3 ]; then
      out=$(mktemp)
      /usr/bin/python3 "$here/amp_torch.py" --workload "$(torch_name "$w")" --threads "$threads" --out "$out" 2> /dev/null &&
        sed 's/^{/{"torch": "f32", /' "$out"
      : > "$out"
      /usr/bin/python3 "$here/amp_torch.py" --workload "$(torch_name "$w")" --threads "$threads" --amp --out "$out" 2> /dev/null &&
        sed 's/^{/{"torch": "autocast bf16", /' "$out"
      rm -f "$out"
    fi
  done
done
