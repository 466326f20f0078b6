#!/bin/sh
# Parameter-server throughput (docs/parameter-server.md): `oar train` on word2vec and wide & deep
# with 2 workers and 1 or 2 servers in sync, async and GEO modes, and one process for reference,
# one thread per rank. JSON lines on stdout (oar train's final line, with "rep" added), then a
# summary of medians over repetitions (range in brackets): examples/s over both workers, the
# evaluation loss and wide & deep's test AUC, and GEO's throughput over async's.
# Usage: bench/ps.sh [BUILD_DIR] [SHARED_DIR] [REPS] [GEO_K]
build=${1:-build}
shared=${2:-../shared}
reps=${3:-3}
geo_k=${4:-10}
export OAR_SHARED_DIR=$shared OMPI_MCA_rmaps_base_oversubscribe=1
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
oar="$build/oar"
workloads="wide-deep:256:1000"
[ -f "$shared/data/text/austen.txt" ] && workloads="word2vec:512:600 $workloads" ||
  echo "bench/ps.sh: $shared/data/text/austen.txt not found: word2vec left out" >&2
for r in $(seq 1 "$reps"); do
  for spec in $workloads; do
    model=${spec%%:*}; rest=${spec#*:}; batch=${rest%%:*}; steps=${rest#*:}
    run() { "$oar" train --model "$model" --batch "$batch" --steps "$steps" --seed 1 --quiet "$@" 2>/dev/null |
              grep '^{"model"' | sed "s/^{/{\"rep\": $r, /"; }
    run --threads 1
    for s in 1 2; do
      run --nproc $((2 + s)) --ps-servers $s --ps-mode sync
      run --nproc $((2 + s)) --ps-servers $s --ps-mode async
      run --nproc $((2 + s)) --ps-servers $s --ps-mode geo --geo-k "$geo_k"
    done
  done
done | tee "$out"
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def med(xs): return statistics.median(xs) if xs else float("nan")
def cell(xs, f="{:.0f}"): return (f.format(med(xs)) + " (" + f.format(min(xs)) + "-" + f.format(max(xs)) + ")") if xs else "-"
print("\nmodel      mode        servers  examples/s (range)      eval loss   test AUC   (medians of %d)" % max(r["rep"] for r in rows))
for model in ("word2vec", "wide-deep"):
    sel = [r for r in rows if r["model"] == model]
    if not sel: continue
    for mode in ("in-process", "sync", "async", "geo"):
        for s in ((0,) if mode == "in-process" else (1, 2)):
            g = [r for r in sel if r["mode"] == mode and r["servers"] == s]
            if not g: continue
            auc = [r["test_auc"] for r in g if "test_auc" in r]
            print(f"{model:10s} {mode:11s} {s:7d}  {cell([r['examples_per_s'] for r in g]):24s} "
                  f"{med([r['eval_loss'] for r in g]):.4f}    " + (f"{med(auc):.4f}" if auc else "-"))
    for s in (1, 2):
        geo = [r["examples_per_s"] for r in sel if r["mode"] == "geo" and r["servers"] == s]
        asy = [r["examples_per_s"] for r in sel if r["mode"] == "async" and r["servers"] == s]
        syn = [r.get("test_auc") for r in sel if r["mode"] == "sync" and r["servers"] == s]
        gau = [r.get("test_auc") for r in sel if r["mode"] == "geo" and r["servers"] == s]
        if geo and asy:
            line = f"{model:10s} {s} server(s): GEO / async throughput {med(geo) / med(asy):.2f}x"
            if syn and syn[0] is not None:
                line += f", GEO test AUC - sync {med(gau) - med(syn):+.4f}"
            print(line)
PY
