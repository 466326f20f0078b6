#!/bin/sh
# oar info end to end: the text and JSON forms name the CPU, the ISA in use, every optional
# library, the cache sizes and the thread count; OAR_CPU_ISA caps the ISA (and oneDNN with it); bad values and
# options are refused with the choices named.
# Usage: info.sh OAR_BINARY
set -eu
oar=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
has() { grep -q -- "$1" "$dir/out" || { echo "info: no '$1' in: $(cat "$dir/out")"; exit 1; }; }

"$oar" info > "$dir/out"
for f in "^cpu: " "^flags: " "^isa: " "^caches:   L1d [1-9][0-9]* KiB, L2 [1-9][0-9]* KiB" "^threads: " "^amp: " "OpenBLAS" "oneDNN" "cJSON" "zlib" "MPI" "CUDA"; do has "$f"; done
OAR_NUM_THREADS=1 "$oar" info > "$dir/out"
has "^threads:  1$"

"$oar" info --json > "$dir/out"
for f in '"cpu": {"model": ' '"amp": {"bf16": ' '"flags": \[' '"native_isa": ' '"isa": ' '"caches": {"l1d": [1-9]' '"threads": ' '"libraries": \[' '"above_cap": '; do has "$f"; done
if command -v python3 > /dev/null; then
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert len(d["libraries"]) == 6, d' "$dir/out"
fi

# CUDA, where built: the device count, or "no device"
if grep -q '"name": "CUDA", "found": true' "$dir/out"; then
  grep -Eq '"name": "CUDA", "found": true, "version": "[^"]*", "detail": "([0-9]+ devices?|no device)' "$dir/out" ||
    { echo "info: CUDA found but no device count in: $(cat "$dir/out")"; exit 1; }
fi

# the cap, from the environment: generic is below every CPU oar runs on
OAR_CPU_ISA=generic "$oar" info --json > "$dir/out"
has '"isa": "generic", "isa_source": "OAR_CPU_ISA"'
if grep -q '"name": "oneDNN", "found": true' "$dir/out"; then
  has '"name": "oneDNN", "found": true, "version": "[0-9.]*", "detail": "effective ISA sse41'
fi
OAR_CPU_ISA=generic "$oar" info > "$dir/out"
has "^isa:      generic (cap; OAR_CPU_ISA)"

# refusals: a name that is no ISA, an unknown option
if OAR_CPU_ISA=sse9 "$oar" info > "$dir/out" 2>&1; then echo "info: OAR_CPU_ISA=sse9 accepted"; exit 1; fi
has "expected one of generic, avx2, avx512, got 'sse9'"
if "$oar" info --xml > "$dir/out" 2>&1; then echo "info: --xml accepted"; exit 1; fi
has "oar info: unknown flag '--xml'"
# an ISA the CPU lacks is refused, naming what it has (only testable below AVX-512)
native=$("$oar" info | sed -n 's/.*the CPU has \(.*\)$/\1/p')
if [ "$native" != avx512 ]; then
  if OAR_CPU_ISA=avx512 "$oar" info > "$dir/out" 2>&1; then echo "info: avx512 accepted on a $native CPU"; exit 1; fi
  has "lacks avx512"
fi
echo "info: 1 passed, 0 failed"
