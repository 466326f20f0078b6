#!/bin/sh
# Data-parallel scaling, oar beside PyTorch DDP (gloo) in one run: for each model and
# repetition, oar eager 1 and 2 ranks, oar compiled (--mode static: buckets made by the
# compiler) 1 and 2 ranks, torch 1 and 2 ranks back to back (1 thread per rank, same per-rank
# batch), then the allreduce table. JSON lines on stdout; a summary of
# medians over repetitions (scaling efficiency = samples/s at 2 / (2 x samples/s at 1)) last.
# Usage: bench/dist.sh [BUILD_DIR] [SHARED_DIR] [REPS]
build=${1:-build}
shared=${2:-../shared}
reps=${3:-3}
mpirun="mpirun --oversubscribe --bind-to none"
[ "$(id -u)" -eq 0 ] && mpirun="$mpirun --allow-run-as-root"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for spec in "mlp 64 30" "resnet20 32 10" "gpt-mini 8 5"; do
  set -- $spec
  for r in $(seq 1 "$reps"); do
    for n in 1 2; do
      $mpirun -np $n "$build/bench_dist" train "$1" "$2" "$3" 2>/dev/null | grep '"bench"' | sed 's/^{/{"framework": "oar", /'
      $mpirun -np $n "$build/bench_dist" train "$1" "$2" "$3" static 2>/dev/null | grep '"bench"' | sed 's/^{/{"framework": "oar-static", /'
      /usr/bin/python3 "$(dirname "$0")/dist_torch.py" "$shared" "$1" "$2" "$3" $n 2>/dev/null
    done
  done
done | tee "$out"
$mpirun -np 2 "$build/bench_dist" allreduce 2>/dev/null | grep '"bench"' | tee -a "$out"
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("\nmodel      framework        1 rank samples/s   2 ranks samples/s   scaling   hidden (oar)")
for model in ("mlp", "resnet20", "gpt-mini"):
    for fw in ("oar", "oar-static", "torch-ddp-gloo"):
        one = [r["samples_per_s"] for r in rows if r.get("model") == model and r.get("framework") == fw and r["ranks"] == 1]
        two = [r["samples_per_s"] for r in rows if r.get("model") == model and r.get("framework") == fw and r["ranks"] == 2]
        hid = [r["hidden_fraction"] for r in rows if r.get("model") == model and r.get("framework") == fw and r["ranks"] == 2 and "hidden_fraction" in r]
        if one and two:
            m1, m2 = statistics.median(one), statistics.median(two)
            print(f"{model:10s} {fw:16s} {m1:9.1f} ({min(one):.0f}-{max(one):.0f})  {m2:9.1f} ({min(two):.0f}-{max(two):.0f})"
                  f"  {m2 / (2 * m1):6.2f}   {statistics.median(hid):.2f}" if hid else
                  f"{model:10s} {fw:16s} {m1:9.1f} ({min(one):.0f}-{max(one):.0f})  {m2:9.1f} ({min(two):.0f}-{max(two):.0f})  {m2 / (2 * m1):6.2f}")
PY
