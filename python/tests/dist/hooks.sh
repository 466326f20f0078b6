#!/bin/sh
# DDP communication hooks and ZeroRedundancyOptimizer(overlap_with_ddp=True) under mpirun at 2 ranks
# (docs/dist.md, "Communication hooks"): hooks_script.py's runs against each other (allreduce_hook and a
# hook of the script's own give the hookless run's bits; overlapped ZeRO gives plain ZeRO's bits; the
# compressing hooks do not) and against PyTorch 1.13 with gloo running the same script (or the golden
# values recorded from it), then hooks_errors.py (torch's errors, GradBucket, Future, bf16/fp16 sums).
# Usage: hooks.sh PYTHON PACKAGE_DIR MPIEXEC [PRELOAD]. Skips (77) with a message without MPI or numpy.
py=$1 pkg=$2 mpiexec=$3 preload=$4
here=$(cd "$(dirname "$0")" && pwd)
script="$here/hooks_script.py"
. "$here/mpi_env.sh"
mpi_env python_ddp_hooks 2
torch_side python_ddp_hooks hooks_golden
run() { timeout 180 "$mpiexec" $root --oversubscribe --bind-to none $xopt -np 2 "$py" "$@" >"$dir/out" 2>&1; }
variants="none allreduce fp16 bf16 custom unused unused_plain zero zero_overlap zero_shard powersgd_full powersgd"
for v in $variants; do
  run "$script" oar $v "$dir/oar_$v" || fail "$v, oar"
done
# the same bits: a hook that averages as DDP does, and ZeRO's step inside the hook
for pair in "allreduce none" "custom none" "unused unused_plain" "zero_overlap zero" "zero_shard zero"; do
  set -- $pair
  cmp "$dir/oar_$1" "$dir/oar_$2" 0 || fail "$1 against $2 (bit for bit)"
done
# the compressing hooks round: within their precision of the uncompressed run, and not equal to it
for v in fp16 bf16; do
  cmp "$dir/oar_$v" "$dir/oar_none" 1e-2 || fail "$v against no hook (within 1e-2)"
  if "$py" "$script" compare "$dir/oar_$v" "$dir/oar_none" 0 >"$dir/out" 2>&1; then
    fail "$v gave the uncompressed run's bits: nothing was compressed"
  fi
done
# PowerSGD: a rank as large as the matrices averages through the factors (QR keeps them exact to rounding,
# where Gram-Schmidt lost 4e-6); rank 1 compresses
cmp "$dir/oar_powersgd_full" "$dir/oar_none" 1e-6 || fail "PowerSGD at full rank against no hook (within 1e-6)"
if "$py" "$script" compare "$dir/oar_powersgd" "$dir/oar_none" 1e-3 >"$dir/out" 2>&1; then
  fail "PowerSGD at rank 1 within 1e-3 of no hook: nothing was compressed"
fi
# against PyTorch 1.13 (its overlapped ZeRO needs NCCL: the reference of both overlap runs is its zero run)
for v in $variants; do
  ref=$v tol=1e-5
  case $v in zero_overlap|zero_shard) ref=zero ;; fp16|bf16) tol=1e-3 ;; powersgd_full) tol=1e-6 ;; esac
  if [ $have_torch -eq 1 ]; then
    if [ ! -f "$dir/torch_$ref.0.npz" ]; then
      timeout 300 "$torchpy" "$script" torch $ref "$dir/torch_$ref" >"$dir/out" 2>&1 || { fail "$ref, PyTorch"; continue; }
    fi
    cmp "$dir/torch_$ref" "$dir/oar_$v" $tol || fail "$v against PyTorch (within $tol)"
  else
    cmp "$here/hooks_golden/$ref.json" "$dir/oar_$v" $tol || fail "$v against PyTorch's golden values (within $tol)"
  fi
done
run "$here/hooks_errors.py" && grep -v '^$' "$dir/out" | head -2 || fail "errors, GradBucket, Future, half-precision sums"
if [ $fails -ne 0 ]; then echo "python_ddp_hooks: $fails failed"; exit 1; fi
echo "python_ddp_hooks: all passed"
