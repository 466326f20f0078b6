#!/bin/sh
# oar bench end to end: every workload prints one JSON object with the documented fields
# (short runs: this checks the command, not the speed), and bad flags are refused.
# Usage: bench.sh OAR_BINARY
set -eu
oar=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
field() { grep -q "\"$1\": " "$dir/out" || { echo "bench: no $1 in: $(cat "$dir/out")"; exit 1; }; }

"$oar" bench --workload peak --threads 1 > "$dir/out"
for f in workload isa gflops_1t gflops_all; do field $f; done
"$oar" bench --workload dispatch --json > "$dir/out"
field workload
for mode in eager static; do
  "$oar" bench --workload tiny --mode $mode --threads 1 --steps 5 --json > "$dir/out"
  for f in workload mode threads batch median_ms samples_per_s peak_rss_mb; do field $f; done
  "$oar" bench --workload resnet20-infer --batch 1 --mode $mode --threads 1 --steps 3 --json > "$dir/out"
  for f in workload mode threads batch median_ms samples_per_s; do field $f; done
done
"$oar" bench --workload gpt-mini --mode static --threads 1 --steps 1 --disable-pass fuse_attention --json > "$dir/out"
field tokens_per_s
grep -q '"disabled_passes": "fuse_attention"' "$dir/out"
# every line carries the settings it ran with
settings() { for f in workload mode threads batch dtype disabled_passes isa; do field $f; done; }
"$oar" bench --workload dispatch --quick > "$dir/out"; settings
"$oar" bench --workload gemm --quick --reps 1 --shape sq64 > "$dir/out"; settings
"$oar" bench --workload peak --threads 1 > "$dir/out" && settings
# --batch (and --context for the language models) is what runs, in every model workload
for w in tiny mlp lenet resnet20 resnet20-infer; do
  "$oar" bench --workload $w --batch 3 --steps 1 --threads 1 > "$dir/out"
  settings
  grep -q '"batch": 3,' "$dir/out" || { echo "bench: $w ignored --batch 3: $(cat "$dir/out")"; exit 1; }
done
for w in gpt-mini lstm-lm; do
  "$oar" bench --workload $w --batch 2 --context 7 --steps 1 --threads 1 > "$dir/out"
  settings
  grep -q '"batch": 2, "context": 7,' "$dir/out" || { echo "bench: $w ignored --batch/--context: $(cat "$dir/out")"; exit 1; }
  grep -q '"tokens_per_s"' "$dir/out"
done
# int8 inference of the token models (dynamic: lstm-lm's LSTM and decoder, gpt-mini's 16 Linear)
for w in "lstm-lm 2" "gpt-mini 16"; do
  set -- $w
  "$oar" bench --workload quant-infer --model $1 --quant dynamic --batch 2 --repeats 1 --calls 1 --threads 1 > "$dir/out"
  for f in ms_median ms_min ms_max; do field $f; done
  grep -q "\"int8_layers\": $2," "$dir/out" || { echo "bench: quant-infer $1: $(cat "$dir/out")"; exit 1; }
done
if "$oar" bench --workload quant-infer --model lstm-lm --quant static 2> "$dir/err"; then exit 1; fi
grep -q "lstm-lm, gpt-mini (--quant none|dynamic)" "$dir/err"
# a pass that does not exist is named in the error
if "$oar" bench --workload tiny --mode static --steps 1 --disable-pass no_such_pass 2> "$dir/err"; then exit 1; fi
grep -q "no_such_pass" "$dir/err"
if "$oar" bench --workload resnet20-infer --mode static --steps 1 --disable-pass no_such_pass 2> "$dir/err"; then exit 1; fi
grep -q "no_such_pass" "$dir/err"
if "$oar" bench --workload nope 2> "$dir/err"; then exit 1; fi
grep -q "unknown workload 'nope'" "$dir/err"
# --device: every line says where it ran; cuda runs eagerly on a GPU, and says why not elsewhere
"$oar" bench --workload tiny --steps 1 --device cpu > "$dir/out"
grep -q '"device": "cpu"' "$dir/out" || { echo "bench: no device field: $(cat "$dir/out")"; exit 1; }
if "$oar" bench --workload tiny --steps 1 --device cuda > "$dir/out" 2> "$dir/err"; then
  grep -q '"device": "cuda"' "$dir/out"
else
  grep -q -e "no CUDA device" -e "no CUDA (install" "$dir/err" || { echo "bench: $(cat "$dir/err")"; exit 1; }
fi
if "$oar" bench --workload tiny --device tpu 2> "$dir/err"; then exit 1; fi
grep -q "expected cpu or cuda" "$dir/err"
# compiled on the GPU: the step replays CUDA graphs (the JSON counts them)
if "$oar" bench --workload tiny --steps 3 --mode static --device cuda > "$dir/out" 2> "$dir/err"; then
  grep -q '"cuda_graphs": [1-9]' "$dir/out" || { echo "bench: static on cuda: $(cat "$dir/out" "$dir/err")"; exit 1; }
else
  grep -q -e "no CUDA device" -e "no CUDA (install" "$dir/err" || { echo "bench: $(cat "$dir/err")"; exit 1; }
fi
# the "isa" field is the level the kernels ran at: the CPU switch's cap, not the CPU's best
isa() { sed -n 's/.*"isa": "\([a-z0-9]*\)".*/\1/p' "$dir/out"; }
OAR_CPU_ISA=generic "$oar" bench --workload tiny --steps 1 --threads 1 > "$dir/out"
[ "$(isa)" = portable ] || { echo "bench: OAR_CPU_ISA=generic ran as: $(cat "$dir/out")"; exit 1; }
env -u OAR_CPU_ISA "$oar" bench --workload tiny --steps 1 --threads 1 > "$dir/out"
native=$(isa)
if [ "$native" = avx512 ] || [ "$native" = avx2 ]; then
  for run in "tiny --steps 1" "peak"; do
    OAR_CPU_ISA=avx2 "$oar" bench --workload $run --threads 1 > "$dir/out"
    [ "$(isa)" = avx2 ] || { echo "bench: OAR_CPU_ISA=avx2 ran as: $(cat "$dir/out")"; exit 1; }
  done
fi
# unknown flags: tests/cli/flags.sh
echo "bench: 1 passed, 0 failed"
