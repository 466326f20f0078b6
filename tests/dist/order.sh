#!/bin/sh
# The fixed-order allreduce against the rank-order fold, bit for bit (tests/dist/dist_order.c),
# under mpirun with 2, 3 and 4 ranks. Usage: order.sh MPIEXEC DIST_ORDER. Skips (77) without MPI.
mpiexec=$1
prog=$2
if [ -z "$mpiexec" ]; then
  echo "dist_order: skipped: oar was built without MPI (install libopenmpi-dev openmpi-bin, reconfigure)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
root=""
[ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
rank_asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # Open MPI's plugins keep memory to exit
if ! timeout 60 "$mpiexec" $root --oversubscribe -np 2 true >"$dir/out" 2>&1; then
  echo "dist_order: skipped: $mpiexec cannot start a 2-process job here:"; sed 's/^/    /' "$dir/out"; exit 77
fi
fails=0
for n in 2 3 4; do
  if ASAN_OPTIONS=$rank_asan timeout 120 "$mpiexec" $root --oversubscribe -x ASAN_OPTIONS -np $n "$prog" >"$dir/out" 2>&1 &&
     [ "$(grep -c 'bit for bit' "$dir/out")" -eq $n ]; then
    grep 'bit for bit' "$dir/out" | head -1
  else
    echo "dist_order: FAILED at $n ranks:"; sed 's/^/    /' "$dir/out"; fails=$((fails + 1))
  fi
done
if [ $fails -ne 0 ]; then echo "dist_order: $fails failed"; exit 1; fi
echo "dist_order: all passed"
