#!/bin/sh
# DDP's other algorithms under mpirun at 2 ranks (docs/dist.md, "Communication hooks"): hooks_script.py's
# runs of hook_with_zero_step_interleaved (whole and sharded buckets), batched_powerSGD_hook, post-local SGD
# (post_localSGD_hook with PeriodicModelAverager, and PostLocalSGDOptimizer without the local allreduce),
# DDP(static_graph=True) with a layer rank 1 skips
# against each other (interleaved ZeRO gives plain ZeRO's bits, the two post-local SGD forms each other's;
# the batched hook and local SGD do not give plain DDP's) and against PyTorch 1.13 with gloo running the
# same script (or the golden values recorded from it), then algorithms_checks.py; then more_hooks_checks.py's
# noop, quantization and built-in hooks (2 ranks) and HierarchicalModelAverager (4 ranks) against NumPy
# models of their arithmetic (torch 1.13 offers them only with CUDA).
# Usage: algorithms.sh PYTHON PACKAGE_DIR MPIEXEC [PRELOAD]. Skips (77) with a message without MPI or numpy.
py=$1 pkg=$2 mpiexec=$3 preload=$4
here=$(cd "$(dirname "$0")" && pwd)
script="$here/hooks_script.py"
. "$here/mpi_env.sh"
mpi_env python_ddp_algorithms 2
torch_side python_ddp_algorithms hooks_golden
run() { runn 2 "$@"; }
runn() { n=$1; shift; timeout 180 "$mpiexec" $root --oversubscribe --bind-to none $xopt -np "$n" "$py" "$@" >"$dir/out" 2>&1; }
variants="none zero zero_interleaved zero_interleaved_shard powersgd_batched localsgd localsgd_opt static"
for v in $variants; do
  run "$script" oar $v "$dir/oar_$v" || fail "$v, oar"
done
for pair in "zero_interleaved zero" "zero_interleaved_shard zero" "localsgd_opt localsgd"; do
  set -- $pair
  cmp "$dir/oar_$1" "$dir/oar_$2" 0 || fail "$1 against $2 (bit for bit)"
done
for v in powersgd_batched localsgd; do   # compressed, or local after the warm-up: not plain DDP's result
  if "$py" "$script" compare "$dir/oar_$v" "$dir/oar_none" 1e-3 >"$dir/out" 2>&1; then
    fail "$v within 1e-3 of plain DDP: the gradients were still averaged whole"
  fi
done
# against PyTorch 1.13 (its interleaved ZeRO needs NCCL: the reference of both is its zero run)
for v in zero_interleaved zero_interleaved_shard powersgd_batched localsgd localsgd_opt static; do
  ref=$v
  case $v in zero_*) ref=zero ;; esac
  if [ $have_torch -eq 1 ]; then
    if [ ! -f "$dir/torch_$ref.0.npz" ]; then
      timeout 300 "$torchpy" "$script" torch $ref "$dir/torch_$ref" >"$dir/out" 2>&1 || { fail "$ref, PyTorch"; continue; }
    fi
    cmp "$dir/torch_$ref" "$dir/oar_$v" 1e-5 || fail "$v against PyTorch (within 1e-5)"
  else
    cmp "$here/hooks_golden/$ref.json" "$dir/oar_$v" 1e-5 || fail "$v against PyTorch's golden values (within 1e-5)"
  fi
done
run "$here/algorithms_checks.py" && grep -v '^$' "$dir/out" | head -2 || fail "interleaving, torch's draw, subgroups, averagers, errors"
# the hooks and averagers torch offers only with CUDA/NCCL, against NumPy models of their arithmetic
run "$here/more_hooks_checks.py" hooks && grep -v '^$' "$dir/out" | head -2 || fail "noop, quantization and built-in hooks"
runn 4 "$here/more_hooks_checks.py" hierarchical && grep -v '^$' "$dir/out" | head -2 || fail "HierarchicalModelAverager (4 ranks)"
if [ $fails -ne 0 ]; then echo "python_ddp_algorithms: $fails failed"; exit 1; fi
echo "python_ddp_algorithms: all passed"
