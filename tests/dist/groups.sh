#!/bin/sh
# Process groups through the C API (include/oar/dist.h; docs/dist.md, "Process groups"): dist_groups
# under mpirun with 3 ranks. Usage: groups.sh MPIEXEC DIST_GROUPS. Skips (77) without MPI.
mpiexec=$1
prog=$2
if [ -z "$mpiexec" ]; then
  echo "dist_groups: skipped: oar was built without MPI (install libopenmpi-dev openmpi-bin, reconfigure)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
root=""
[ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
rank_asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # Open MPI's plugins keep memory to exit
if ! timeout 60 "$mpiexec" $root --oversubscribe -np 2 true >"$dir/out" 2>&1; then
  echo "dist_groups: skipped: $mpiexec cannot start a 2-process job here:"; sed 's/^/    /' "$dir/out"; exit 77
fi
fails=0
fail() { echo "dist_groups: FAILED: $*"; sed 's/^/    /' "$dir/out"; fails=$((fails + 1)); }
run() { ASAN_OPTIONS=$rank_asan timeout 120 "$mpiexec" $root --oversubscribe -x ASAN_OPTIONS -np 3 "$prog" "$@" >"$dir/out" 2>&1; }

run api && [ "$(grep -c 'groups OK' "$dir/out")" -eq 3 ] && grep 'groups OK' "$dir/out" | head -1 ||
  fail "collectives within {0, 2} and {1}, errors, data parallel over a group"
start=$(date +%s)
run dead
rc=$?
took=$(( $(date +%s) - start ))
if grep -q 'rank 1: dead OK' "$dir/out"; then grep 'dead peer in the group' "$dir/out"; else fail "a dead peer in a group"; fi
[ $rc -ne 0 ] || fail "dead: the job exited 0 with a dead rank"
[ $took -lt 60 ] || fail "dead: the job took $took s to end"
if [ $fails -ne 0 ]; then echo "dist_groups: $fails failed"; exit 1; fi
echo "dist_groups: all passed"
