#!/bin/sh
# The NHWC int8 graph against the NCHW one (the quant_nhwc pass off) and against the program with
# int8 residual additions (qadd: --int8-residual, qadd of u8 codes instead of f32 block outputs, in
# the epilogues of the convs by default; qsep: the same with the fuse_qadd pass off), beside
# oar's fp32 and PyTorch's static int8, in one run: CPU time per call, 1 thread, as
# bench/quant_cpu_time.sh measures it (user + system time of two runs with C1 and C2 calls, the
# difference per extra call, so setup, calibration and compilation cancel out). The variants
# ($VARIANTS, default "fp32 nhwc qadd nchw torch") run alternately, ROUNDS times; one JSON line
# per variant and round, then the medians and the ratios of the median per-round ratios.
# Usage: bench/quant_nhwc_ab.sh [BUILD_DIR] [MODEL] [BATCH] [ROUNDS] [C1] [C2] [OAR_ARGS]
#   the ISA cap comes from the environment (OAR_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2); OAR_ARGS
#   go to every oar run (e.g. "--weight-bits 8")
set -eu
build=${1:-build}
model=${2:-resnet20}
batch=${3:-32}
rounds=${4:-3}
c1=${5:-2}
c2=${6:-12}
extra=${7:-}
here=$(dirname "$0")
cpu() { /usr/bin/time -f "%U %S" "$@" 2>&1 >/dev/null | grep -v "^W20\|^WARNING" | tail -1 | awk '{print $1 + $2}'; }
oar() { cpu "$build/oar" bench --workload quant-infer --model "$model" --batch "$batch" --threads 1 --repeats 1 $extra "$@"; }
torch() { cpu /usr/bin/python3 "$here/quant_torch.py" --model "$model" --quant static --batch "$batch" --threads 1 \
          --repeats 1 "$@"; }
per_call() { python3 -c "import sys; print(round(1e3 * (float(sys.argv[2]) - float(sys.argv[1])) / (2 * ($c2 - $c1)), 3))" "$1" "$2"; }
out=$(mktemp)
for r in $(seq "$rounds"); do
  for v in ${VARIANTS:-fp32 nhwc qadd nchw torch}; do
    case $v in
      fp32) a=$(oar --quant none --calls $c1); b=$(oar --quant none --calls $c2) ;;
      nhwc) a=$(oar --quant static --calls $c1); b=$(oar --quant static --calls $c2) ;;
      qadd) a=$(oar --quant static --int8-residual --calls $c1); b=$(oar --quant static --int8-residual --calls $c2) ;;
      qsep) a=$(oar --quant static --int8-residual --disable-pass fuse_qadd --calls $c1)
            b=$(oar --quant static --int8-residual --disable-pass fuse_qadd --calls $c2) ;;
      nchw) a=$(oar --quant static --disable-pass quant_nhwc --calls $c1)
            b=$(oar --quant static --disable-pass quant_nhwc --calls $c2) ;;
      torch) a=$(torch --calls $c1); b=$(torch --calls $c2) ;;
    esac
    ms=$(per_call "$a" "$b")
    echo "{\"model\": \"$model\", \"batch\": $batch, \"variant\": \"$v\", \"round\": $r, \"cpu_ms_per_call\": $ms}" | tee -a "$out"
  done
done
python3 - "$out" <<'EOF'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
vs = sorted({r["variant"] for r in rows})
med = {v: statistics.median(r["cpu_ms_per_call"] for r in rows if r["variant"] == v) for v in vs}
rng = {v: [min(r["cpu_ms_per_call"] for r in rows if r["variant"] == v),
           max(r["cpu_ms_per_call"] for r in rows if r["variant"] == v)] for v in vs}
def ratio(a, b):
    return round(statistics.median(x["cpu_ms_per_call"] / y["cpu_ms_per_call"] for x in rows if x["variant"] == a
                                   for y in rows if y["variant"] == b and y["round"] == x["round"]
                                   and y["cpu_ms_per_call"] > 0), 3)
out = {"median_ms": med, "min_max_ms": rng}
for a in vs:
    if a != "nhwc" and "nhwc" in vs: out[a + "_over_nhwc"] = ratio(a, "nhwc")
for a in ("fp32",):
    for b in ("qadd", "nchw"):
        if a in vs and b in vs: out[a + "_over_" + b] = ratio(a, b)
print(json.dumps(out))
EOF
rm -f "$out"
