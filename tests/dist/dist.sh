#!/bin/sh
# Distributed training tests (docs/dist.md): dist_worker under mpirun with 2 and 3 ranks, one
# thread each, beside one-process reference runs. Usage: dist.sh MPIEXEC DIST_WORKER
# Skips (77) with a message when oar was built without MPI or mpirun cannot start a job.
mpiexec=$1
worker=$2
if [ -z "$mpiexec" ]; then
  echo "dist: skipped: oar was built without MPI (install libopenmpi-dev openmpi-bin, reconfigure)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
root=""
# sanitizer builds: ranks under mpirun run without the leak check, since Open MPI keeps memory
# from MPI_Init to exit in plugins it has unloaded by then (no suppression can name them); the
# one-process runs below keep it, and ASan's other checks stay on everywhere
rank_asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
xopt=""
[ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
run() { # run NPROC ARGS...: the job's output in $dir/out, its status in $rc
  np=$1; shift
  ASAN_OPTIONS=$rank_asan timeout 120 "$mpiexec" $root --oversubscribe -x ASAN_OPTIONS $xopt -np "$np" "$worker" "$@" \
    >"$dir/out" 2>&1
  rc=$?
}
fail() { echo "dist: FAILED: $*"; sed 's/^/    /' "$dir/out"; fails=$((fails + 1)); }
expect_ok() { if [ $rc -eq 0 ]; then grep -v '^$' "$dir/out" | grep -v -- '^---' | head -3; else fail "$@ (exit $rc)"; fi; }
count() { grep -c "$1" "$dir/out"; }

if ! timeout 60 "$mpiexec" $root --oversubscribe -np 2 true >"$dir/out" 2>&1; then
  echo "dist: skipped: $mpiexec cannot start a 2-process job here:"; sed 's/^/    /' "$dir/out"
  exit 77
fi

for n in 2 3; do
  run $n sampler; expect_ok "sampler, $n ranks"
  run $n unused; expect_ok "unused parameters, $n ranks"
done
run 2 buckets; expect_ok "bucket sizes and overlap"
run 2 hooks; expect_ok "a communication hook in C"
run 2 cbuckets; expect_ok "compiled data parallel: buckets and overlap"

# N ranks at batch 8 against one process at batch 8N over 200 steps (the bound of docs/dist.md),
# and a repeated run bit for bit
"$worker" train 200 16 "$dir/one16" >"$dir/out" 2>&1 || fail "one process, batch 16"
"$worker" train 200 24 "$dir/one24" >"$dir/out" 2>&1 || fail "one process, batch 24"
run 2 train 200 8 "$dir/two_a"; expect_ok "2 ranks, batch 8"
run 2 train 200 8 "$dir/two_b"; expect_ok "2 ranks, batch 8, again"
run 3 train 200 8 "$dir/three"; expect_ok "3 ranks, batch 8"
run 3 train 200 8 "$dir/three_b"; expect_ok "3 ranks, batch 8, again"
# compiled data parallel (the step traced, its allreduces bucketed by the compiler): the same bits
# as eager data parallel at 2 and 3 ranks, and as the eager step in one process
"$worker" train 200 16 "$dir/one16s" static >"$dir/out" 2>&1 || fail "one process, batch 16, compiled"
run 2 train 200 8 "$dir/two_s" static; expect_ok "2 ranks, batch 8, compiled"
run 3 train 200 8 "$dir/three_s" static; expect_ok "3 ranks, batch 8, compiled"
# gradient accumulation: 2 ranks x 2 micro-batches of 8 (the first under no_sync) against one
# process x 2 micro-batches of 16
"$worker" train 100 16 "$dir/one16acc" accum2 >"$dir/out" 2>&1 || fail "one process, 2 micro-batches of 16"
run 2 train 100 8 "$dir/two_acc" accum2; expect_ok "2 ranks, 2 micro-batches of 8 (no_sync)"
# SyncBatchNorm: 2 ranks x 8 against one process with BatchNorm x 16 (the merged batch); per-rank
# BatchNorm at 2 ranks must NOT match it (the statistics of 8 samples differ), or the check is blind
"$worker" syncbn 60 16 "$dir/bn16" plain >"$dir/out" 2>&1 || fail "one process, BatchNorm, batch 16"
"$worker" syncbn 60 16 "$dir/sbn16" >"$dir/out" 2>&1 || fail "one process, SyncBatchNorm, batch 16"
run 2 syncbn 60 8 "$dir/two_sbn"; expect_ok "2 ranks, SyncBatchNorm, batch 8"
run 2 syncbn 60 8 "$dir/two_bn" plain; expect_ok "2 ranks, per-rank BatchNorm, batch 8"
# ... and compiled (the step traced: SyncBatchNorm's sums and the buckets are program nodes): the
# eager bits, running statistics and batch count included
run 2 syncbn 60 8 "$dir/two_sbn_s" static; expect_ok "2 ranks, SyncBatchNorm, batch 8, compiled"
if "$worker" compare "$dir/bn16" "$dir/two_bn" 1e-5 1e-6 >"$dir/out" 2>&1; then
  fail "per-rank BatchNorm matched the merged batch: the SyncBatchNorm check cannot fail"
else
  sed -n "s|$dir/||g; s/^compare/per-rank BatchNorm (expected to differ): compare/p" "$dir/out"
fi
for pair in "bn16 sbn16 1e-5 1e-6" "bn16 two_sbn 1e-5 1e-6" "one16acc two_acc 1e-3 1e-4" "two_a two_b 0 0" "three three_b 0 0" "one16 two_a 1e-3 1e-4" "one24 three 1e-3 1e-4" \
            "one16 one16s 0 0" "two_a two_s 0 0" "three three_s 0 0" "two_sbn two_sbn_s 0 0"; do
  set -- $pair
  "$worker" compare "$dir/$1" "$dir/$2" "$3" "$4" >"$dir/out" 2>&1 && sed "s|$dir/||g" "$dir/out" || fail "compare $pair"
done

# a rank SIGKILLed mid-training: the others stop within 2 s naming it, and exit non-zero. Open MPI
# ends the whole job when a rank dies or exits non-zero, so on a loaded machine the second survivor
# could be torn down before it reported: the job keeps its survivors (recovery on, no abort on a
# non-zero exit; as tests/dist/ps.sh), mpirun then exits 0, and each rank prints its own status
keep=""
"$mpiexec" --version 2>/dev/null | grep -q -e "OpenRTE" -e "Open MPI" &&
  keep="--mca orte_abort_on_non_zero_status 0 --mca orte_enable_recovery 1"
start=$(date +%s)
ASAN_OPTIONS=$rank_asan timeout 120 "$mpiexec" $root --oversubscribe $keep -x ASAN_OPTIONS -np 3 \
  sh -c '"$0" "$@"; echo "rank ${OMPI_COMM_WORLD_RANK:-?} exit status $?"' "$worker" kill "$dir/killtime" \
  >"$dir/out" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
if [ "$(count 'detected after')" -ne 2 ] || [ "$(count 'rank 2 (.*) died')" -ne 2 ]; then
  fail "kill: expected both survivors to name rank 2"
else
  grep 'detected after' "$dir/out" | head -2
  for ms in $(sed -n 's/.*detected after \([0-9]*\) ms.*/\1/p' "$dir/out"); do
    [ "$ms" -lt 2000 ] || fail "kill: detected after $ms ms (limit 2000)"
  done
fi
if [ -n "$keep" ]; then
  [ "$(count 'rank [01] exit status [1-9]')" -eq 2 ] || fail "kill: expected both survivors to exit non-zero"
else
  [ $rc -ne 0 ] || fail "kill: the job exited 0"
fi
[ $took -lt 30 ] || fail "kill: the job took $took s to end"

# mismatched collectives and a skipped collective are reported, never hang
run 2 mismatch
[ "$(count 'mismatch OK')" -eq 2 ] && grep 'bucket mismatch' "$dir/out" | head -1 || fail "mismatch"
export OAR_DIST_COLLECTIVE_TIMEOUT_MS=1000
xopt="-x OAR_DIST_COLLECTIVE_TIMEOUT_MS"
run 2 stall
[ "$(count 'stall OK')" -eq 1 ] && grep 'stall reported' "$dir/out" || fail "stall"

if [ $fails -ne 0 ]; then echo "dist: $fails failed"; exit 1; fi
echo "dist: all passed"
