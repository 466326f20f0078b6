#!/bin/sh
# Times one eager training step of each reference workload in oar and in PyTorch (Debian's
# python3-torch, ../shared/bench/torch_workloads.py), alternating in one run, at 1 and 2
# threads. PyTorch's 2-thread figure is the best of its three 2-thread configurations (see
# ../shared/bench/README.md). Prints one JSON line per workload and thread count with both
# medians and the ratio torch/oar (> 1: oar is faster).
# Usage: bench/compare_torch.sh [BUILD_DIR] [SHARED_DIR] [workloads...]
set -eu
build=${1:-build}
shared=${2:-../shared}
shift 2 2>/dev/null || true
workloads=${*:-tiny mlp lenet resnet20 gpt-mini lstm-lm}
tw=$shared/bench/torch_workloads.py
[ -f "$tw" ] || { echo "compare_torch: $tw not found" >&2; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

torch_ms() { # workload, extra args -> median ms
  rm -f "$out"
  /usr/bin/python3 "$tw" --workload "$1" --out "$out" $2 > /dev/null 2>&1 || { echo "nan"; return; }
  sed -n 's/.*"median_ms": \([0-9.]*\).*/\1/p' "$out" | tail -1
}

for w in $workloads; do
  tname=$w
  [ "$w" = gpt-mini ] && tname=gpt
  [ "$w" = lstm-lm ] && tname=lstm
  for t in 1 2; do
    oar=$("$build/oar" bench --workload "$w" --threads "$t" --json | sed -n 's/.*"median_ms": \([0-9.]*\).*/\1/p')
    if [ "$t" = 1 ]; then
      torch=$(torch_ms "$tname" "--threads 1")
    else
      a=$(torch_ms "$tname" "--threads 2"); b=$(torch_ms "$tname" "--threads 1 --blas-threads 2")
      c=$(torch_ms "$tname" "--threads 2 --omp-wait passive")
      torch=$(printf '%s\n%s\n%s\n' "$a" "$b" "$c" | grep -v nan | sort -g | head -1)
    fi
    awk -v w="$w" -v t="$t" -v o="$oar" -v p="$torch" 'BEGIN {
      printf "{\"workload\": \"%s\", \"threads\": %d, \"oar_median_ms\": %s, \"torch_median_ms\": %s, \"ratio\": %.2f}\n",
             w, t, o, p, (o > 0 ? p / o : 0) }'
  done
done
