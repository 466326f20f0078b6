#!/bin/sh
# Runs a test with oar's CPU switch capped: isa_run.sh CAP COMMAND [ARGS...]
# (CAP: avx2 or generic; docs/cpu-isa.md). OAR_CPU_ISA caps oar's own kernels and rules and
# oneDNN (oar passes the cap to it before its first primitive). OpenBLAS picks its kernels
# when it loads, so the cap reaches it only through OPENBLAS_CORETYPE, set here to a core
# within the cap, and only where the CPU has that core's instructions (forcing a core the CPU
# lacks would crash rather than cap). A test that is itself about the CPU reads the cap back.
set -eu
cap=$1
shift
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
case $cap in
  avx2) core=Haswell; need=" avx2 " ;;
  generic) core=Nehalem; need=" sse4_2 " ;;
  *) echo "isa_run.sh: expected avx2 or generic, got '$cap'" >&2; exit 2 ;;
esac
export OAR_CPU_ISA=$cap
case "$flags " in
  *"$need"*) export OPENBLAS_CORETYPE=$core ;;
esac
exec "$@"
