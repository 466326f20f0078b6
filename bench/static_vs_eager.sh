#!/bin/sh
# Times one training step of each reference workload in oar eager and oar static (the step
# compiled by oar_jit_to_static), alternating in one run, at 1 and 2 threads, REPS times each.
# Prints one JSON line per workload and thread count: medians over the repetitions of each
# mode's median step time, their spread (min..max), the speedup eager/static (> 1: static is
# faster) and the allocator's peak in both modes.
# Usage: bench/static_vs_eager.sh [BUILD_DIR] [REPS] [workloads...]
set -eu
build=${1:-build}
reps=${2:-3}
shift 2 2>/dev/null || true
workloads=${*:-tiny mlp lenet resnet20 gpt-mini lstm-lm}

field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }

for w in $workloads; do
  for t in 1 2; do
    e_ms=""; s_ms=""; e_mb=0; s_mb=0
    i=0
    while [ "$i" -lt "$reps" ]; do
      e=$("$build/oar" bench --workload "$w" --threads "$t" --mode eager --json)
      s=$("$build/oar" bench --workload "$w" --threads "$t" --mode static --json)
      e_ms="$e_ms $(echo "$e" | field median_ms)"; s_ms="$s_ms $(echo "$s" | field median_ms)"
      e_mb=$(echo "$e" | field peak_alloc_mb); s_mb=$(echo "$s" | field peak_alloc_mb)
      i=$((i + 1))
    done
    echo "$e_ms|$s_ms" | awk -F'|' -v w="$w" -v t="$t" -v em="$e_mb" -v sm="$s_mb" '
      function med(s, a,   n, i, j, x) { n = split(s, a, " ");
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
        lo = a[1]; hi = a[n]; return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      { e = med($1, A); elo = lo; ehi = hi; s = med($2, B); slo = lo; shi = hi;
        printf "{\"workload\": \"%s\", \"threads\": %d, \"eager_ms\": %.3f, \"eager_range\": [%.3f, %.3f], \"static_ms\": %.3f, \"static_range\": [%.3f, %.3f], \"speedup\": %.2f, \"eager_peak_mb\": %s, \"static_peak_mb\": %s}\n",
               w, t, e, elo, ehi, s, slo, shi, (s > 0 ? e / s : 0), em, sm }'
  done
done
