#!/bin/sh
# Data-parallel scaling across two hosts joined by a shaped link (bench/netns_hosts.sh: two
# network namespaces, 1 Gbit/s, plus 1 ms of delay where the kernel has netem), oar beside
# PyTorch DDP (gloo) in the same run: per model and repetition, oar eager and compiled at 1 rank
# (host 0) and 2 ranks (one per host, MPI over TCP), torch 1 and 2 ranks likewise. JSON lines,
# then medians with their range. Needs root (exits 77 otherwise).
# Usage: bench/dist_netns.sh [BUILD_DIR] [SHARED_DIR] [REPS] [MODELS]
build=$(cd "${1:-build}" && pwd)
shared=$(cd "${2:-../shared}" && pwd)
reps=${3:-3}
models=${4:-"mlp:64:30 resnet20:32:10"}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
delay="--delay 1ms"
# netem is a kernel module some kernels lack: probe it in a throwaway namespace
if ip netns add "oarnetem$$" 2>/dev/null; then
  ip netns exec "oarnetem$$" tc qdisc add dev lo root netem delay 1ms 2>/dev/null || delay=""
  ip netns del "oarnetem$$"
else
  echo "dist_netns: skipped: needs root and permission to make network namespaces"; exit 77
fi
echo "dist_netns: link 1gbit ${delay:-(no netem in this kernel: rate limit only)}" >&2
runs=$(mktemp)
trap 'rm -f "$out" "$runs"' EXIT
for spec in $models; do
  IFS=: read -r model batch steps <<EOS
$spec
EOS
  for r in $(seq 1 "$reps"); do
    for mode in eager static; do
      tag=oar; [ $mode = static ] && tag=oar-static
      echo "mpirun -np 1 $build/bench_dist train $model $batch $steps $mode 2>/dev/null | grep '\"bench\"' | sed 's/^{/{\"framework\": \"$tag\", \"link\": \"netns\", /'"
      echo "mpirun -np 2 --host 10.77.0.1:1,10.77.0.2:1 --map-by node --bind-to none -x OAR_DIST_PORT $build/bench_dist train $model $batch $steps $mode 2>/dev/null | grep '\"bench\"' | sed 's/^{/{\"framework\": \"$tag\", \"link\": \"netns\", /'"
    done
    for n in 1 2; do
      echo "mpirun -np $n --host 10.77.0.1:1,10.77.0.2:1 --map-by node --bind-to none -x MASTER_ADDR=10.77.0.1 -x MASTER_PORT=29533 -x GLOO_SOCKET_IFNAME=eth0 -x OMP_NUM_THREADS=1 /usr/bin/python3 $here/dist_torch.py $shared $model $batch $steps $n 2>/dev/null | grep '\"bench\"' | sed 's/^{/{\"link\": \"netns\", /'"
    done
  done
done >"$runs"
"$here/netns_hosts.sh" job 2 --rate 1gbit $delay -- sh "$runs" | tee "$out"
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("\nacross 2 namespaced hosts (1 Gbit/s link)")
print("model      framework        1 rank samples/s   2 ranks samples/s   scaling   hidden (oar)")
for model in sorted({r["model"] for r in rows}):
    for fw in ("oar", "oar-static", "torch-ddp-gloo"):
        one = [r["samples_per_s"] for r in rows if r["model"] == model and r["framework"] == fw and r["ranks"] == 1]
        two = [r["samples_per_s"] for r in rows if r["model"] == model and r["framework"] == fw and r["ranks"] == 2]
        hid = [r["hidden_fraction"] for r in rows if r["model"] == model and r["framework"] == fw and r["ranks"] == 2 and "hidden_fraction" in r]
        if one and two:
            m1, m2 = statistics.median(one), statistics.median(two)
            print(f"{model:10s} {fw:16s} {m1:9.1f} ({min(one):.0f}-{max(one):.0f})  {m2:9.1f} ({min(two):.0f}-{max(two):.0f})"
                  f"  {m2 / (2 * m1):6.2f}" + (f"   {statistics.median(hid):.2f}" if hid else ""))
PY
