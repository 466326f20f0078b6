#!/bin/sh
# Data parallel across two hosts (bench/netns_hosts.sh: network namespaces joined by a 1 Gbit/s
# link, MPI and the liveness channel over TCP), started by `oar launch --hosts`: the same bits as
# the same job on one host (the fixed-order reduction does not depend on the transport).
# Usage: netns_dist.sh OAR_CLI DIST_WORKER NETNS_HOSTS_SH. Skips (77) without root, network
# namespaces or MPI.
oar=$1 worker=$2 hosts=$3
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! ip netns add "oarprobe$$" 2>/dev/null; then
  echo "netns_dist: skipped: needs root, iproute2 and permission to make network namespaces (CAP_NET_ADMIN)"
  exit 77
fi
ip netns del "oarprobe$$"
if ! command -v mpirun >/dev/null; then
  echo "netns_dist: skipped: needs mpirun (apt-get install openmpi-bin)"; exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# sanitizer builds: no leak check in ranks (Open MPI keeps memory to exit in plugins it has unloaded;
# see dist.sh); the ranks inherit the variable, also through the hosts' rsh agent
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if ! timeout 60 mpirun --oversubscribe -np 2 true >"$dir/out" 2>&1; then
  echo "netns_dist: skipped: mpirun cannot start a 2-process job here:"; sed 's/^/    /' "$dir/out"; exit 77
fi
if ! timeout 120 "$oar" launch --nproc 2 -- "$worker" train 40 8 "$dir/local" >"$dir/out" 2>&1; then
  echo "netns_dist: FAILED: the job on this host:"; sed 's/^/    /' "$dir/out"; exit 1
fi
if ! timeout 180 "$hosts" job 2 --rate 1gbit -- "$oar" launch --nproc 2 --hosts 10.77.0.1:1,10.77.0.2:1 -- \
     "$worker" train 40 8 "$dir/hosts" >"$dir/out" 2>&1; then
  echo "netns_dist: FAILED: the job across two namespaced hosts:"; sed 's/^/    /' "$dir/out"; exit 1
fi
grep -E "^  [01] " "$dir/out"
if ! grep -q "^  1     0      10.77.0.2" "$dir/out"; then
  echo "netns_dist: FAILED: rank 1 did not run on the second host:"; sed 's/^/    /' "$dir/out"; exit 1
fi
"$worker" compare "$dir/local" "$dir/hosts" 0 0 || { echo "netns_dist: FAILED: the hosts' run differs"; exit 1; }
echo "netns_dist: passed"
