#!/usr/bin/env bash
# The GPU checks of the CUDA backend, as one script for a machine with a GPU (about 8 minutes
# on an H100/H200): builds oar there (or takes binaries built elsewhere from $OAR_GPU_BIN),
# runs the CUDA test program, the op sweep's GPU pass (every CUDA kernel and gradient
# against the host reference), the GPU micro-benchmarks beside PyTorch, and
# compute-sanitizer's memcheck; writes one log per step into the folder named by its
# argument and prints a summary. Usage: tests/cuda/run_on_device.sh OUTDIR
set -u
out=${1:?usage: run_on_device.sh OUTDIR}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
summary() { echo "== $*"; echo "$*" >> "$out/summary.txt"; }
: > "$out/summary.txt"
summary "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"

bin=""
if [ -z "${OAR_GPU_BIN:-}" ]; then
  gen=""; command -v ninja >/dev/null && gen="-G Ninja"
  if cmake -S . -B build-gpu $gen -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$out/build.log" 2>&1 &&
     cmake --build build-gpu -j "$(nproc)" --target test_cuda sweep bench_cuda bench_cuda_gpt2 oar_cli >> "$out/build.log" 2>&1; then
    bin=build-gpu
    summary "build: ok ($(grep -c 'Building' "$out/build.log") steps)"
    rm -f "$out/build.log" # at most 8 files come back from some machines: keep the results
  else
    summary "build: FAILED here (tail of build.log below); trying carried binaries"
    tail -30 "$out/build.log"
  fi
fi
if [ -z "$bin" ]; then
  bin=${OAR_GPU_BIN:-gpu-bin}
  [ -x "$bin/tests/test_cuda" ] || { summary "no binaries in $bin"; exit 1; }
fi
run() { # name timeout command...
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  summary "$name: rc=$rc in $(( $(date +%s) - t0 ))s: $(tail -1 "$out/$name.log")"
  return $rc
}
run test_cuda 120 "$bin/tests/test_cuda"
run sweep_cuda 240 "$bin/tests/sweep" --device cuda
fails=$(grep '^FAIL' "$out/sweep_cuda.log" | sed 's/(.*//' | sort | uniq -c | sort -rn | head -60)
[ -n "$fails" ] && summary "failing ops (count): $(echo $fails)"
run bench_oar 120 "$bin/bench_cuda"
for w in tiny mlp lenet resnet20 gpt-mini lstm-lm; do  # the oar command's path to the GPU
  timeout 60 "$bin/oar" bench --workload $w --device cuda --steps 20 >> "$out/bench_oar.log" 2>&1
done
summary "oar bench --device cuda: $(grep -c '"device": "cuda"' "$out/bench_oar.log") of 6 workloads ran"
run bench_torch 300 python3 bench/cuda_torch.py ${OAR_TORCH_COMPILE:+--compile}
# GPT-2-124M bf16 training steps, oar then PyTorch (eager; torch.compile with OAR_TORCH_COMPILE=1)
run gpt2_oar 120 "$bin/bench_cuda_gpt2" --batch 8 --steps 6 --attn matmul
run gpt2_oar_fused 120 "$bin/bench_cuda_gpt2" --batch 8 --steps 4 --attn fused
run gpt2_torch 120 python3 bench/cuda_torch.py --gpt2 eager
[ -n "${OAR_TORCH_COMPILE:-}" ] && run gpt2_torch_compile 240 python3 bench/cuda_torch.py --gpt2 compile
# op tables with GPU spans (CUDA events): the host's and the device's time per op
{ "$bin/bench_cuda" --profile gpt-mini; "$bin/bench_cuda" --profile lstm-lm; } > "$out/profile.log" 2>&1
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
run memcheck_test_cuda 180 "$san" --tool memcheck --report-api-errors no --error-exitcode 9 "$bin/tests/test_cuda"
run memcheck_sweep 240 "$san" --tool memcheck --report-api-errors no --error-exitcode 9 "$bin/tests/sweep" --device cuda --no-low-precision
cat "$out"/bench_*.log "$out"/gpt2_*.log
