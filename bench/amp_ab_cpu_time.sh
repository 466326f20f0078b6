#!/bin/sh
# Two oar binaries (before and after a change) interleaved: CPU time per training step at one
# thread of f32 and --amp O1/O2 bf16, eager and compiled, natively and capped at AVX2
# (OAR_CPU_ISA=avx2: no native bf16), by bench/amp_cpu_time.sh's method (user + sys of a long
# run minus a short one, over the extra steps). One JSON line per measurement.
# Usage: bench/amp_ab_cpu_time.sh BEFORE_OAR AFTER_OAR [WORKLOADS] [REPS] [CAPS]
#   CAPS: "avx2 native" by default ("native" runs uncapped).
set -eu
before=$1
after=$2
workloads=${3:-"resnet20 gpt-mini"}
reps=${4:-3}
caps=${5:-"avx2 native"}
cpu() { /usr/bin/time -f "%U %S" "$@" 2>&1 >/dev/null | tail -1 | awk '{print $1 + $2}'; }
for r in $(seq "$reps"); do
  for w in $workloads; do
    case $w in gpt-mini) short=2 long=6 ;; *) short=3 long=13 ;; esac
    for cap in $caps; do
      isa=$cap
      [ "$cap" = native ] && isa=
      for m in static eager; do
        for amp in f32 O1 O2; do
          a=
          [ "$amp" != f32 ] && a="--amp $amp"
          for bin in before after; do
            b=$before
            [ "$bin" = after ] && b=$after
            s=$(OAR_CPU_ISA=$isa cpu "$b" bench --workload "$w" --threads 1 --mode "$m" --steps "$short" $a)
            l=$(OAR_CPU_ISA=$isa cpu "$b" bench --workload "$w" --threads 1 --mode "$m" --steps "$long" $a)
            ms=$(echo "$s $l" | awk -v n=$((long - short)) '{printf "%.1f", ($2 - $1) * 1000 / n}')
            echo "{\"bin\": \"$bin\", \"workload\": \"$w\", \"cap\": \"$cap\", \"mode\": \"$m\", \"amp\": \"$amp\", \"rep\": $r, \"cpu_ms_per_step\": $ms, \"load\": $(cut -d' ' -f1 /proc/loadavg)}"
          done
        done
      done
    done
  done
done
