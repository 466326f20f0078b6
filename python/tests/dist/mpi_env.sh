# Sourced by the scripts here (PYTHON PACKAGE_DIR MPIEXEC [PRELOAD] in $py $pkg $mpiexec $preload):
# mpi_env NAME NPROC skips (77) with a message without MPI, numpy or an mpirun that starts NPROC
# ranks, exports the package path (and, in the sanitizer build, its runtimes) to the ranks through
# $xopt, and makes the scratch folder $dir, removed at exit.
mpi_env() {
  if [ -z "$mpiexec" ]; then
    echo "$1: skipped: oar was built without MPI (install libopenmpi-dev openmpi-bin, reconfigure)"; exit 77
  fi
  if ! "$py" -c "import numpy" 2>/dev/null; then
    echo "$1: skipped: numpy is absent for $py (apt-get install python3-numpy)"; exit 77
  fi
  export PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1
  xopt="-x PYTHONPATH -x OMP_NUM_THREADS"
  if [ -n "$preload" ]; then # the sanitizer build: its runtimes go into the (uninstrumented) interpreter
    export LD_PRELOAD="$preload" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    xopt="$xopt -x LD_PRELOAD -x ASAN_OPTIONS"
  fi
  root=""
  [ "$(id -u)" -eq 0 ] && root="--allow-run-as-root"
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  if ! timeout 60 "$mpiexec" $root --oversubscribe -np "$2" true >"$dir/out" 2>&1; then
    echo "$1: skipped: $mpiexec cannot start a $2-process job here:"; sed 's/^/    /' "$dir/out"; exit 77
  fi
}

# torch_side NAME GOLDEN_DIR, for the scripts that compare oar's runs with PyTorch's: $torchpy and
# $have_torch (1: PyTorch with gloo can run $script; else the golden values in GOLDEN_DIR stand in),
# $fails counted by fail MESSAGE (which shows the last run's output), and cmp ARGS ($script's compare,
# its report shown when it passes).
torch_side() {
  name=$1
  torchpy=${OAR_TORCH_PYTHON:-/usr/bin/python3}
  have_torch=0
  if "$torchpy" -c "import numpy, torch.distributed as d; assert d.is_gloo_available()" 2>/dev/null; then have_torch=1; fi
  [ $have_torch -eq 1 ] || echo "$1: PyTorch with gloo is absent for $torchpy: compared with the golden values in $2/"
  fails=0
}
fail() { echo "$name: FAILED: $*"; sed 's/^/    /' "$dir/out"; fails=$((fails + 1)); }
cmp() { "$py" "$script" compare "$@" >"$dir/out" 2>&1 && cat "$dir/out"; }
