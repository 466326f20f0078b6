#!/bin/sh
# bench/compare.py end to end on the tiny workload at 1 and 2 threads, one repetition: a peak
# record per thread count, a row per thread count with oar and torch times and ratios, and a
# thread-scaling record (this checks the script, not the speed); then --cap avx2 at 1 thread,
# whose rows must say oar and PyTorch ran at AVX2, and bench/cpu_time_compare.py likewise.
# Skipped without PyTorch
# (/usr/bin/python3 -c 'import torch') or ../shared/bench.
# Usage: compare.sh OAR_BINARY SOURCE_DIR SHARED_DIR
set -eu
oar=$1 src=$2 shared=$3
if [ ! -f "$shared/bench/torch_workloads.py" ]; then
  echo "compare: skipped: $shared/bench/torch_workloads.py not found"; exit 0
fi
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "compare: skipped: /usr/bin/python3 cannot import torch (apt-get install python3-torch)"; exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 "$src/bench/compare.py" --build "$(dirname "$oar")" --shared "$shared" --reps 1 \
  --threads 1 2 --workloads tiny > "$dir/out" 2> "$dir/err" || { cat "$dir/err"; exit 1; }
/usr/bin/python3 - "$dir/out" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
peaks = {r["threads"]: r for r in recs if r["workload"] == "peak"}
rows = {r["threads"]: r for r in recs if r["workload"] == "tiny" and "threads" in r}
scal = [r for r in recs if "scaling_threads" in r]
ok = set(peaks) == {1, 2} and all(p["gflops"] > 0 for p in peaks.values()) and set(rows) == {1, 2}
for r in rows.values():
    ok = ok and all(isinstance(r[k], float) and r[k] > 0 for k in
                    ("oar_eager_ms", "oar_static_ms", "torch_ms", "ratio_torch_over_static", "static_peak_fraction"))
ok = ok and len(scal) == 1 and scal[0]["scaling_threads"] == [1, 2] and scal[0]["oar_static_speedup"] > 0
ok = ok and abs(scal[0]["oar_static_speedup"] - rows[1]["oar_static_ms"] / rows[2]["oar_static_ms"]) < 1e-9
if not ok:
    sys.exit("compare: unexpected output:\n" + open(sys.argv[1]).read())
PY
grep -q "| tiny | 1 → 2 |" "$dir/err" || { echo "compare: no scaling table in: $(cat "$dir/err")"; exit 1; }
# --cap avx2 holds both sides to AVX2 and says so in every row (on a CPU with AVX2 and FMA)
if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo; then
  /usr/bin/python3 "$src/bench/compare.py" --build "$(dirname "$oar")" --shared "$shared" --reps 1 \
    --threads 1 --workloads tiny --cap avx2 > "$dir/out" 2> "$dir/err" || { cat "$dir/err"; exit 1; }
  /usr/bin/python3 - "$dir/out" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in recs if r["workload"] == "tiny"]
ok = len(rows) == 1 and rows[0]["cap"] == "avx2" and rows[0]["oar_isa"] == "avx2" and rows[0]["cpu"]
ok = ok and rows[0]["torch_cpu_capability"] == "AVX2" and rows[0]["torch_ms"] > 0
ok = ok and all(r["cap"] == "avx2" for r in recs if r["workload"] == "peak")
if not ok:
    sys.exit("compare --cap avx2: unexpected output:\n" + open(sys.argv[1]).read())
PY
  # the CPU-time comparison for shared machines: one row, positive per-step figures, the cap
  /usr/bin/python3 "$src/bench/cpu_time_compare.py" --build "$(dirname "$oar")" --shared "$shared" --reps 1 \
    --workloads tiny --cap avx2 > "$dir/out" 2> "$dir/err" || { cat "$dir/err"; exit 1; }
  /usr/bin/python3 - "$dir/out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ok = len(rows) == 1 and rows[0]["workload"] == "tiny" and rows[0]["cap"] == "avx2"
ok = ok and rows[0]["torch_cpu_capability"] == "AVX2"
ok = ok and all(isinstance(rows[0][k], float) and rows[0][k] > 0 for k in
                ("oar_static_cpu_ms", "oar_eager_cpu_ms", "torch_cpu_ms", "ratio_torch_over_static"))
if not ok:
    sys.exit("cpu_time_compare: unexpected output:\n" + open(sys.argv[1]).read())
PY
  grep -q "| tiny |" "$dir/err" || { echo "cpu_time_compare: no table in: $(cat "$dir/err")"; exit 1; }
fi
echo "compare: 1 passed, 0 failed"
