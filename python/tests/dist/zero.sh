#!/bin/sh
# ZeroRedundancyOptimizer under mpirun at 2 and 3 ranks (docs/dist.md, "ZeroRedundancyOptimizer"):
# zero_script.py's runs with DDP against DDP with the plain optimizer (bit for bit), against PyTorch 1.13's
# ZeroRedundancyOptimizer with gloo (or the golden values recorded from it), its bad-input errors, and
# over a process group.
# Usage: zero.sh PYTHON PACKAGE_DIR MPIEXEC [PRELOAD]. Skips (77) with a message without MPI or numpy.
py=$1 pkg=$2 mpiexec=$3 preload=$4
here=$(cd "$(dirname "$0")" && pwd)
script="$here/zero_script.py"
. "$here/mpi_env.sh"
mpi_env python_zero 3
torch_side python_zero zero_golden
run() { np=$1; shift; timeout 180 "$mpiexec" $root --oversubscribe --bind-to none $xopt -np "$np" "$py" "$script" "$@" >"$dir/out" 2>&1; }
for n in 2 3; do
  for v in plain zero bucket join; do
    run $n oar $v $n "$dir/oar_$v$n" || fail "$v at $n ranks, oar"
  done
  # the sharded step updates each parameter as the plain optimizer does: the same bits, and the same
  # consolidated optimizer state
  for v in zero bucket; do
    cmp "$dir/oar_plain$n" "$dir/oar_$v$n" $n 0 state || fail "ZeRO ($v) against DDP with plain Adam at $n ranks"
  done
  for v in zero bucket join; do
    if [ $have_torch -eq 1 ]; then
      timeout 300 "$torchpy" "$script" torch $v $n "$dir/torch_$v$n" >"$dir/out" 2>&1 || { fail "$v at $n ranks, PyTorch"; continue; }
      cmp "$dir/torch_$v$n" "$dir/oar_$v$n" $n 1e-5 state counts || fail "$v at $n ranks against PyTorch"
    else
      cmp "$here/zero_golden/$v$n.json" "$dir/oar_$v$n" $n 1e-5 counts || fail "$v at $n ranks against PyTorch's golden values"
    fi
  done
done
# the comparison can fail: DDP with plain Adam misses the uneven-input run by far
if "$py" "$script" compare "$dir/oar_plain2" "$dir/oar_join2" 2 1e-5 >"$dir/out" 2>&1; then
  fail "the join run matched the even run: the comparison is blind"
fi
run 2 errors && grep -v '^$' "$dir/out" | head -2 || fail "bad input"
run 3 group && grep -v '^$' "$dir/out" | head -3 || fail "ZeRO over a process group"
if [ $fails -ne 0 ]; then echo "python_zero: $fails failed"; exit 1; fi
echo "python_zero: all passed"
