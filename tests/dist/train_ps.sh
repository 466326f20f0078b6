#!/bin/sh
# `oar train --ps-servers S --ps-mode M` end to end (docs/parameter-server.md), one part per call
# so each CTest test stays short:
#   wide-deep-sync  2 workers + 1 server in sync mode against one process at the same global batch
#              (the embedding tables add up in the same order; the MLP's weight gradients are
#              sums over each worker's half of the batch, so the results agree to fp32 rounding:
#              test AUC within 2e-4, test loss within 1e-4 relative); 2 + 2 servers give the
#              tables of 2 + 1 bit for bit (sharding does not change the arithmetic)
#   wide-deep-modes  async and GEO reach the test AUC of one process (= sync's) within 0.01
#   word2vec   (needs ../shared's Austen corpus) sync 2 + 1 gives the tables of one process bit for
#              bit (every gradient row is one sample's); async and GEO within 5% of sync's loss on a
#              fixed evaluation sample
#   kill       the server SIGKILLed mid-training: both workers fail naming rank 0 within 2 s and
#              exit non-zero on their own (oar launch keeps them until they report, and names each)
# Usage: train_ps.sh OAR_BINARY SHARED_DIR HAVE_MPI(0|1) PART. Skips (77) without MPI or data.
oar=$1
shared=$2
part=$4
if [ "$3" != 1 ]; then echo "train_ps: skipped: oar was built without MPI (install libopenmpi-dev openmpi-bin)"; exit 77; fi
if [ "$part" = word2vec ] && [ ! -f "$shared/data/text/austen.txt" ]; then
  echo "train_ps: skipped: $shared/data/text/austen.txt not found (the word2vec corpus)"; exit 77
fi
export OAR_SHARED_DIR=$shared
. "$(dirname "$0")/kill_rank.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
# sanitizer builds: no leak check in the ranks (Open MPI's plugin allocations; see dist.sh)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fail() { echo "train_ps: FAILED: $*"; for f in "$dir"/*.log; do echo "  $f:"; sed 's/^/    /' "$f" | tail -12; done; fails=$((fails + 1)); }
# train NAME ARGS...: runs oar train, keeps its JSON line in $dir/NAME.json
train() {
  name=$1; shift
  timeout 120 "$oar" train --seed 3 --quiet "$@" > "$dir/$name.log" 2>&1 || { fail "$name: oar train $*"; return; }
  grep '^{"model"' "$dir/$name.log" > "$dir/$name.json"
  [ "$(grep -c '^{"model"' "$dir/$name.log")" -eq 1 ] || fail "$name: expected one JSON line (worker 0 only)"
  echo "train_ps: $name: $(cat "$dir/$name.json")"
}
field() { sed -n "s/.*\"$2\": \"\{0,1\}\([^,\"}]*\).*/\1/p" "$dir/$1.json"; }
# within A B TOL [relative]: |A - B| <= TOL (times |A| when relative)
within() { awk -v a="$1" -v b="$2" -v t="$3" -v r="$4" 'BEGIN { d = a - b; if (d < 0) d = -d; if (r) t *= (a < 0 ? -a : a); exit !(a != "" && b != "" && d <= t) }'; }
at_least() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN { exit !(a != "" && b >= a - m) }'; }

case "$part" in
wide-deep-sync)
  common="--model wide-deep --batch 256 --steps 150"
  train local $common --metrics "$dir/metrics.json"
  cmp -s "$dir/metrics.json" "$dir/local.json" || fail "--metrics did not get the JSON line"
  "$oar" train $common --resume > "$dir/refused.log" 2>&1
  [ $? -eq 2 ] && grep -q "resume is not available for --model wide-deep" "$dir/refused.log" || fail "--resume not refused"
  train sync1 $common --nproc 3 --ps-servers 1 --ps-mode sync
  train sync2 $common --nproc 4 --ps-servers 2 --ps-mode sync
  within "$(field local test_auc)" "$(field sync1 test_auc)" 2e-4 || fail "sync test AUC $(field sync1 test_auc) vs one process $(field local test_auc)"
  within "$(field local eval_loss)" "$(field sync1 eval_loss)" 1e-4 1 || fail "sync test loss $(field sync1 eval_loss) vs one process $(field local eval_loss)"
  [ "$(field sync1 tables_fnv1a)" = "$(field sync2 tables_fnv1a)" ] || fail "2 servers changed the tables"
  grep -q "parameter server: 2 servers, 2 workers, mode sync" "$dir/sync2.log" || fail "no PS line"
  ;;
wide-deep-modes) # against one process, which sync equals (wide-deep-sync)
  common="--model wide-deep --batch 256 --steps 150"
  train local $common
  train async $common --nproc 3 --ps-servers 1 --ps-mode async
  train geo $common --nproc 3 --ps-servers 1 --ps-mode geo --geo-k 5
  at_least "$(field local test_auc)" "$(field async test_auc)" 0.01 || fail "async AUC $(field async test_auc) vs sync $(field local test_auc)"
  at_least "$(field local test_auc)" "$(field geo test_auc)" 0.01 || fail "GEO AUC $(field geo test_auc) vs sync $(field local test_auc)"
  ;;
word2vec)
  common="--model word2vec --batch 512 --steps 150"
  train local $common
  train sync1 $common --nproc 3 --ps-servers 1 --ps-mode sync
  train async $common --nproc 3 --ps-servers 1 --ps-mode async
  train geo $common --nproc 3 --ps-servers 1 --ps-mode geo --geo-k 5
  [ "$(field local tables_fnv1a)" = "$(field sync1 tables_fnv1a)" ] || fail "sync tables differ from one process's"
  for m in async geo; do
    within "$(field sync1 eval_loss)" "$(field $m eval_loss)" 0.05 1 || fail "$m loss $(field $m eval_loss) vs sync $(field sync1 eval_loss)"
  done
  awk -v a="$(field local loss_first)" -v b="$(field local loss)" 'BEGIN { exit !(b < a) }' || fail "the loss did not fall"
  ;;
kill)
  "$oar" train --model wide-deep --batch 64 --steps 100000000 --nproc 3 --ps-servers 1 > "$dir/kill.log" 2>&1 &
  job=$!
  for i in $(seq 1 1200); do grep -q "^training:" "$dir/kill.log" && break; sleep 0.05; done
  sleep 0.5
  if ! kill_rank $job 0; then
    fail "could not find the server's process (rank 0)"; kill $job
  else
    start=$killed_at
    # the time until both workers have said so, polled every 10 ms
    took=""
    for i in $(seq 1 500); do
      if [ "$(grep -c 'oar train: rank [12]: .*rank 0 .*died' "$dir/kill.log")" -ge 2 ]; then took=$(( ($(date +%s%N) - start) / 1000000 )); break; fi
      sleep 0.01
    done
    wait $job; rc=$?
    # oar launch names the killed server and both workers' own non-zero exits; its status is the
    # failure its wrappers saw first (137 unless the server's wrapper was starved past the workers' ends)
    [ $rc -ne 0 ] || fail "the job exited 0 after its server was killed"
    grep -q '^oar launch: rank 0 was killed by signal 9' "$dir/kill.log" || fail "oar launch did not name the killed server"
    [ "$(grep -c '^oar launch: rank [12] exited with [1-9]' "$dir/kill.log")" -eq 2 ] || fail "the workers did not both exit non-zero"
    if [ -z "$took" ]; then fail "the workers did not both name rank 0 within 5 s"
    elif [ "$took" -ge 2000 ]; then fail "the workers named the dead server after $took ms (limit 2000)"
    else echo "train_ps: server killed; both workers named it within $took ms:"; grep 'rank 0 .*died' "$dir/kill.log" | cut -c1-150; fi
  fi
  ;;
*) echo "usage: train_ps.sh OAR SHARED HAVE_MPI wide-deep-sync|wide-deep-modes|word2vec|kill"; exit 2 ;;
esac
[ $fails -eq 0 ] && echo "train_ps $part: all passed" || echo "train_ps $part: $fails failed"
[ $fails -eq 0 ]
