#!/bin/sh
# The Python distributed API under mpirun (docs/dist.md, "From Python"): ddp_worker.py with 2 ranks
# beside one-process reference runs. Usage: run.sh PYTHON PACKAGE_DIR MPIEXEC [PRELOAD]
# Skips (77) with a message without MPI, numpy or the built package.
py=$1 pkg=$2 mpiexec=$3 preload=$4
here=$(cd "$(dirname "$0")" && pwd)
worker="$here/ddp_worker.py"
. "$here/mpi_env.sh"
mpi_env python_dist 2
fails=0
fail() { echo "python_dist: FAILED: $*"; sed 's/^/    /' "$dir/out"; fails=$((fails + 1)); }
run() { # run NPROC ARGS...: a job of the worker
  np=$1; shift
  timeout 180 "$mpiexec" $root --oversubscribe --bind-to none $xopt -np "$np" "$py" "$worker" "$@" >"$dir/out" 2>&1
}
one() { timeout 180 "$py" "$worker" "$@" >"$dir/out" 2>&1; }
ok() { grep -v '^$' "$dir/out" | head -2; }

run 2 api && ok || fail "collectives, sampler, unused parameters, no_sync, buckets"
run 2 mock && ok || fail "torch code under the switch"
# 2 ranks at batch 8 against one process at batch 16 (the bound of docs/dist.md), a repeat bit for
# bit, the compiled step bit for bit, and SyncBatchNorm against BatchNorm at the merged batch
one train 100 16 "$dir/one16" || fail "one process, batch 16"
run 2 train 100 8 "$dir/two_a" && ok || fail "2 ranks, batch 8"
run 2 train 100 8 "$dir/two_b" || fail "2 ranks, batch 8, again"
run 2 train 100 8 "$dir/two_c" compiled && ok || fail "2 ranks, batch 8, compiled"
one train 60 16 "$dir/bn16" bn || fail "one process, BatchNorm, batch 16"
run 2 train 60 8 "$dir/sbn" syncbn && ok || fail "2 ranks, SyncBatchNorm, batch 8"
run 2 train 60 8 "$dir/sbn_c" syncbn compiled || fail "2 ranks, SyncBatchNorm, batch 8, compiled"
# per-rank BatchNorm at 2 ranks must miss the merged batch's bound, or the SyncBatchNorm check is blind
run 2 train 60 8 "$dir/bn2" bn || fail "2 ranks, per-rank BatchNorm, batch 8"
if "$py" "$worker" compare "$dir/bn16" "$dir/bn2" 1e-3 1e-4 >"$dir/out" 2>&1; then
  fail "per-rank BatchNorm matched the merged batch: the SyncBatchNorm check cannot fail"
else
  sed -n 's/^compare/per-rank BatchNorm (expected to differ): compare/p' "$dir/out"
fi
# broadcast_buffers in a compiled step: rank 0's BatchNorm statistics reach rank 1 before every call
run 2 train 60 8 "$dir/bn2_c" bn compiled || fail "2 ranks, per-rank BatchNorm, batch 8, compiled"
for pair in "one16 two_a 1e-3 1e-4" "two_a two_b 0 0" "two_a two_c 0 0" "bn16 sbn 1e-3 1e-4" "sbn sbn_c 0 0" \
            "bn2 bn2_c 0 0" "bn2.rank1 bn2_c.rank1 0 0"; do
  set -- $pair
  "$py" "$worker" compare "$dir/$1" "$dir/$2" "$3" "$4" >"$dir/out" 2>&1 && cat "$dir/out" || fail "compare $pair"
done
# process groups at 4 ranks (python/tests/dist/group_worker.py)
groups="$here/group_worker.py"
runw() { np=$1; shift; timeout 180 "$mpiexec" $root --oversubscribe --bind-to none $xopt -np "$np" "$py" "$@" >"$dir/out" 2>&1; }
runw 4 "$groups" groups && ok || fail "process groups: collectives within {0,1} and {2,3}, non-members, errors"
runw 4 "$groups" ddp_group && ok || fail "DDP over a process group against one process on the group's data"
# DDP.join with uneven inputs (5 and 3 batches), and torch's generic Join([ddp, counter]) with a joinable of
# the script's own: the same torch script run by oar under the switch and by PyTorch 1.13 with gloo when
# /usr/bin/python3 has it (else the golden values recorded from it)
join="$here/join_script.py"
torchpy=${OAR_TORCH_PYTHON:-/usr/bin/python3}
have_torch=0
if "$torchpy" -c "import numpy, torch.distributed as d; assert d.is_gloo_available()" 2>/dev/null; then have_torch=1; fi
[ $have_torch -eq 1 ] || echo "python_dist: PyTorch with gloo is absent for $torchpy: DDP.join is compared with the golden values in join_golden/"
for v in join effective throw multi; do
  runw 2 "$join" oar $v "$dir/oar_$v" || { fail "DDP.join ($v), oar"; continue; }
  ref="$here/join_golden/$v.json"
  if [ $have_torch -eq 1 ]; then
    timeout 180 "$torchpy" "$join" torch $v "$dir/torch_$v" >"$dir/out" 2>&1 || { fail "DDP.join ($v), PyTorch"; continue; }
    ref="$dir/torch_$v"
  fi
  "$py" "$join" compare "$ref" "$dir/oar_$v" 1e-5 >"$dir/out" 2>&1 && cat "$dir/out" || fail "DDP.join ($v) against PyTorch"
done
# the comparison can fail: torch's default divisor against oar's effective-world-size run must differ
ref="$here/join_golden/join.json"
[ $have_torch -eq 1 ] && ref="$dir/torch_join"
if "$py" "$join" compare "$ref" "$dir/oar_effective" 1e-5 >"$dir/out" 2>&1; then
  fail "DDP.join: divide_by_initial_world_size True and False gave the same result: the check is blind"
fi
# the same with the step compiled (oar.jit.to_static): the joined rank shadows the program's buckets
for v in join effective; do
  runw 2 "$join" oar compiled_$v "$dir/oar_compiled_$v" || { fail "DDP.join ($v) in a compiled step, oar"; continue; }
  ref="$here/join_golden/$v.json"
  [ $have_torch -eq 1 ] && ref="$dir/torch_$v"
  "$py" "$join" compare "$ref" "$dir/oar_compiled_$v" 1e-5 >"$dir/out" 2>&1 && cat "$dir/out" ||
    fail "DDP.join ($v) in a compiled step against PyTorch"
done
runw 2 "$join" oar mismatch "$dir/oar_mismatch" && ok || fail "DDP.join against a collective outside DDP"
runw 2 "$join" oar dead "$dir/oar_dead"
grep -q "join dead rank 1: OK" "$dir/out" && grep "join dead rank 1" "$dir/out" | cut -c1-200 || fail "DDP.join: a rank that dies while another shadows it"
if [ $fails -ne 0 ]; then echo "python_dist: $fails failed"; exit 1; fi
echo "python_dist: all passed"
