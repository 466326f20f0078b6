#!/bin/sh
# `oar train --nproc N` end to end on the UCI digits: 2 ranks follow one process at the same
# global batch; only rank 0 prints; a run stopped at a checkpoint resumes with another N; a rank
# SIGKILLed mid-training is named by the survivor within 2 s, which then exits non-zero, the
# checkpoint stays loadable, and --resume finishes; oar launch keeps a killed rank's survivors
# until they end, forwards the first failure's status, and stops ranks that outlive --grace.
# Usage: train_dist.sh OAR_BINARY SHARED_DIR HAVE_MPI(0|1)
oar=$1
shared=$2
if [ "$3" != 1 ]; then echo "train_dist: skipped: oar was built without MPI"; exit 77; fi
if [ ! -f "$shared/data/sklearn/digits_train.csv" ]; then echo "train_dist: skipped: $shared/data/sklearn not found"; exit 77; fi
export OAR_SHARED_DIR=$shared
. "$(dirname "$0")/kill_rank.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
# sanitizer builds: no leak check in the ranks (Open MPI's plugin allocations; see dist.sh)
dp_asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fail() { echo "train_dist: FAILED: $*"; for f in "$dir"/*.log; do echo "  $f:"; sed 's/^/    /' "$f" | tail -15; done; fails=$((fails + 1)); }
common="--model tiny --data digits --batch 32 --seed 3 --threads 1 --workers 1"
test_loss() { "$oar" eval --model tiny --data digits --checkpoint "$1" | sed -n 's/.*"test_loss": \([0-9.e+-]*\).*/\1/p'; }
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-4 * a) }'; }

# oar launch: the table of ranks and endpoints, the job's exit status forwarded, bad hosts refused
"$oar" launch --nproc 2 -- sh -c 'exit 3' > "$dir/launch.log" 2>&1
rc=$?
[ $rc -eq 3 ] || fail "oar launch returned $rc for a job exiting 3"
[ "$(grep -cE '^  [01] +[01] +localhost +localhost:[0-9]+$' "$dir/launch.log")" -eq 2 ] || fail "no table of 2 ranks"
"$oar" launch --nproc 2 -- sh -c 'test "$PADDLE_TRAINERS_NUM" = 2 && test -n "$OAR_DIST_PORT"' > "$dir/launch.log" 2>&1 ||
  fail "oar launch did not export PADDLE_TRAINERS_NUM and OAR_DIST_PORT"
"$oar" launch --nproc 2 --hosts here:1 -- true > "$dir/launch.log" 2>&1
[ $? -eq 2 ] && grep -q "lists 1 processes, --nproc asks for 2" "$dir/launch.log" || fail "--hosts mismatch not refused"
# a killed rank does not get the others torn down (mpirun's default): they end on their own, and the
# job's status is the first failure's, whatever the later ones; the status lines never show
"$oar" launch --nproc 3 -- sh -c 'case $OMPI_COMM_WORLD_RANK in 0) sleep 1; exit 3;; 1) kill -9 $$;; esac
  sleep 2; echo "rank $OMPI_COMM_WORLD_RANK ran on"; exit 0' > "$dir/launch.log" 2>&1
rc=$?
[ $rc -eq 137 ] || fail "oar launch returned $rc where rank 1 was killed (SIGKILL) first, expected 137"
grep -q "^rank 2 ran on" "$dir/launch.log" || fail "rank 2 did not run on after rank 1 was killed"
grep -q "^oar launch: rank 1 was killed by signal 9" "$dir/launch.log" && grep -q "^oar launch: rank 0 exited with 3" \
  "$dir/launch.log" || fail "oar launch did not name the failed ranks"
! grep -q "oar-launch-status" "$dir/launch.log" || fail "a rank's status line reached the output"
# a line that looks like a status line but lacks the job's token is a rank's own output
"$oar" launch --nproc 2 -- sh -c 'printf "\036oar-launch-status 0123abcd 0 exit 9 1\n" >&2' > "$dir/launch.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c "oar-launch-status 0123abcd" "$dir/launch.log")" -eq 2 ] || fail "a rank's own status-like line: rc $rc"
# a rank that outlives --grace after a failure is stopped
"$oar" launch --nproc 2 --grace 1 -- sh -c '[ $OMPI_COMM_WORLD_RANK = 0 ] && exit 4; exec sleep 60' > "$dir/launch.log" 2>&1
rc=$?
[ $rc -eq 4 ] && grep -q "rank 1 was killed by signal 15" "$dir/launch.log" && grep -q "stopping it (--grace)" \
  "$dir/launch.log" || fail "--grace 1: rc $rc, the sleeping rank not stopped"

# 2 ranks x 16 against 1 process x 32: the same run within fp32 rounding; only rank 0 prints
"$oar" train $common --epochs 4 --quiet --checkpoint "$dir/one.safetensors" > "$dir/one.log" 2>&1 || fail "one process"
ASAN_OPTIONS=$dp_asan "$oar" train $common --epochs 4 --nproc 2 --checkpoint "$dir/two.safetensors" > "$dir/two.log" 2>&1 || fail "2 ranks"
grep -q "data parallel: 2 ranks of batch 16" "$dir/two.log" || fail "no data parallel line"
[ "$(grep -c '^epoch 4/4:' "$dir/two.log")" -eq 1 ] || fail "expected one rank to print"
a=$(test_loss "$dir/one.safetensors"); b=$(test_loss "$dir/two.safetensors")
close "$a" "$b" && echo "train_dist: test loss one process $a, 2 ranks $b" || fail "test loss $a vs $b"

# --mode static: the step compiled with its allreduces bucketed by the compiler; the same run
ASAN_OPTIONS=$dp_asan "$oar" train $common --epochs 4 --nproc 2 --mode static --checkpoint "$dir/two_static.safetensors" > "$dir/two_static.log" 2>&1 || fail "2 ranks, --mode static"
s=$(test_loss "$dir/two_static.safetensors")
close "$a" "$s" && echo "train_dist: --mode static, 2 ranks: test loss $s" || fail "--mode static test loss $s vs $a"

# stopped after epoch 2 with 2 ranks, resumed in one process: ends where the uninterrupted run does
ASAN_OPTIONS=$dp_asan "$oar" train $common --epochs 4 --steps 88 --nproc 2 --checkpoint "$dir/part.safetensors" > "$dir/part.log" 2>&1 || fail "part"
"$oar" train $common --epochs 4 --resume --checkpoint "$dir/part.safetensors" > "$dir/resume.log" 2>&1 || fail "resume"
grep -q "resumed from .* at step 88" "$dir/resume.log" || fail "did not resume at step 88"
c=$(test_loss "$dir/part.safetensors")
close "$a" "$c" && echo "train_dist: resumed with another N: test loss $c" || fail "resumed test loss $c vs $a"

# rank 0 (the one that writes checkpoints) SIGKILLed mid-training
ASAN_OPTIONS=$dp_asan "$oar" train $common --epochs 100000 --nproc 2 --checkpoint "$dir/kill.safetensors" > "$dir/kill.log" 2>&1 &
job=$!
for i in $(seq 1 200); do [ -f "$dir/kill.safetensors" ] && break; sleep 0.05; done
sleep 0.3
if ! kill_rank $job 0; then
  fail "could not find rank 0's process"; kill $job
else
  start=$killed_at
  # the time until the survivor has said so (2 s goal), polled every 10 ms
  named=""
  for i in $(seq 1 500); do
    if grep -q "rank 1: dist: rank 0 (.*) died" "$dir/kill.log"; then named=$(( ($(date +%s%N) - start) / 1000000 )); break; fi
    sleep 0.01
  done
  wait $job; rc=$?
  took=$(( ($(date +%s%N) - start) / 1000000 ))
  # oar launch names the killed rank and the survivor's own non-zero exit (the job's status is
  # the failure its wrappers saw first: 137 unless rank 0's wrapper was starved past rank 1's end)
  [ $rc -ne 0 ] || fail "the job exited 0 after rank 0 was killed"
  grep -q "^oar launch: rank 0 was killed by signal 9" "$dir/kill.log" || fail "oar launch did not name the killed rank"
  grep -q "^oar launch: rank 1 exited with [1-9]" "$dir/kill.log" || fail "the survivor did not exit non-zero"
  if ! grep -q "rank 1: dist: rank 0 (.*) died" "$dir/kill.log"; then fail "the survivor did not name rank 0"
  elif [ -z "$named" ] || [ "$named" -ge 2000 ]; then fail "the survivor named rank 0 after ${named:-over 5000} ms (limit 2000)"
  fi
  [ $took -lt 5000 ] || fail "the job took $took ms to stop"
  echo "train_dist: rank 0 killed; the survivor named it after $named ms, the job stopped after $took ms: $(grep -o 'rank 1: dist: rank 0 ([^)]*) died' "$dir/kill.log")"
  "$oar" eval --model tiny --data digits --checkpoint "$dir/kill.safetensors" > /dev/null 2>&1 || fail "the checkpoint is damaged"
  ASAN_OPTIONS=$dp_asan "$oar" train $common --epochs 100000 --steps 1 --nproc 2 --resume --checkpoint "$dir/kill.safetensors" > "$dir/resume2.log" 2>&1 &&
    grep -q "resumed from" "$dir/resume2.log" || fail "resume after the kill"
fi
if [ $fails -ne 0 ]; then exit 1; fi
echo "train_dist: all passed"
