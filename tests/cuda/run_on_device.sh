#!/usr/bin/env bash
# The GPU checks of the CUDA backend, as one script for a machine with a GPU: builds oar there
# (or takes binaries built elsewhere from $OAR_GPU_BIN), runs the CUDA test program, the op
# sweep's GPU pass (every CUDA kernel and gradient against the host reference, f32/f64 and
# f16/bf16), the zoo's training steps eager and compiled (CUDA graphs) beside PyTorch, the
# GPT-2-124M bf16 step, GPU op tables, GPU tensors from Python (python/tests/gpu_check.py: a small
# model's forward, backward and SGD steps on cuda equal cpu) and compute-sanitizer's memcheck;
# writes one log per step into the folder named by its argument and a summary.
#   Usage: tests/cuda/run_on_device.sh OUTDIR
#   OAR_GPU_STAGES="test sweep python bench gpt2 profile compile memcheck" (the default, about
#   13 minutes on an H100; an H200 ran them in about 6, build included) picks stages, so that a
#   device window of a few minutes can run the ones that matter and a rerun only what failed;
#   the stage "kernels" (not in the default) times GPT-2's big kernels alone (ncu, and an op
#   table of synchronous launches). OAR_TORCH_COMPILE=1 adds torch.compile.
set -u
out=${1:?usage: run_on_device.sh OUTDIR}
stages=" ${OAR_GPU_STAGES:-test sweep python bench gpt2 profile compile memcheck} "
mkdir -p "$out"
cd "$(dirname "$0")/../.."
summary() { echo "== $*"; echo "$*" >> "$out/summary.txt"; }
want() { [[ "$stages" == *" $1 "* ]]; }
: > "$out/summary.txt"
summary "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1); stages:$stages"

bin=""
if [ -z "${OAR_GPU_BIN:-}" ]; then
  gen=""; command -v ninja >/dev/null && gen="-G Ninja"
  deps="" # libraries carried from the build machine (tests/cuda/pack_device_deps.sh)
  if [ -d device-deps/lib ]; then
    deps="-DCMAKE_PREFIX_PATH=$PWD/device-deps"
    export LD_LIBRARY_PATH="$PWD/device-deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  t0=$(date +%s)
  if cmake -S . -B build-gpu $gen $deps -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$out/build.log" 2>&1 &&
     cmake --build build-gpu -j "$(nproc)" --target test_cuda sweep bench_cuda bench_cuda_gpt2 oar_cli >> "$out/build.log" 2>&1; then
    bin=build-gpu
    summary "build: ok in $(( $(date +%s) - t0 ))s"
    rm -f "$out/build.log" # few files come back from some machines: keep the results
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
if want test; then
  run test_cuda 180 "$bin/tests/test_cuda"
  grep -E '^(FAIL|not ok)|failed' "$out/test_cuda.log" | head -20 >> "$out/summary.txt"
fi
if want sweep; then
  run sweep_cuda 240 "$bin/tests/sweep" --device cuda
  fails=$(grep '^FAIL' "$out/sweep_cuda.log" | sed 's/(.*//' | sort | uniq -c | sort -rn | head -60)
  [ -n "$fails" ] && summary "failing ops (count): $(echo $fails)"
fi
if want python; then  # GPU tensors from Python: the extension of this build, then gpu_check.py (numpy only)
  if [ "$bin" = build-gpu ] && cmake --build build-gpu -j "$(nproc)" --target oar_python > "$out/python_build.log" 2>&1; then
    PYTHONPATH=$PWD/build-gpu/python run python_gpu 120 python3 python/tests/gpu_check.py
  else
    summary "python: no extension built ($( [ "$bin" = build-gpu ] && tail -1 "$out/python_build.log" || echo "carried binaries have none")); needs python3-dev and numpy"
  fi
fi
if want bench; then
  run bench_oar 150 "$bin/bench_cuda"
  for mode in eager static; do  # the oar command's path to the GPU; static replays CUDA graphs
    for w in tiny mlp lenet resnet20 gpt-mini lstm-lm; do
      timeout 60 "$bin/oar" bench --workload $w --device cuda --mode $mode --steps 20 >> "$out/bench_oar.log" 2>&1
    done
  done
  summary "oar bench --device cuda: $(grep -c '"device": "cuda"' "$out/bench_oar.log") of 12 runs; $(grep -c '"cuda_graphs": [1-9]' "$out/bench_oar.log") of 6 static ones replayed graphs"
  run bench_torch 300 python3 bench/cuda_torch.py ${OAR_TORCH_COMPILE:+--compile}
fi
if want gpt2; then  # GPT-2-124M bf16 training steps, oar then PyTorch
  run gpt2_oar 120 "$bin/bench_cuda_gpt2" --batch 8 --steps 6   # fused attention (the default)
  run gpt2_oar_matmul 120 "$bin/bench_cuda_gpt2" --batch 8 --steps 4 --attn matmul
  # one profiled step: the op table (host and GPU time per op) lands in profile_gpt2.log
  timeout 120 "$bin/bench_cuda_gpt2" --batch 8 --steps 1 --profile > "$out/profile_gpt2.log" 2>&1
  summary "gpt2 profile: rc=$? (profile_gpt2.log): $(grep -m3 -E '^  [a-z_]+ +[0-9]+ ' "$out/profile_gpt2.log" | awk '{print $1, $3 "ms"}' | tr '\n' ' ')"
  run gpt2_torch 120 python3 bench/cuda_torch.py --gpt2 eager
  [ -n "${OAR_TORCH_COMPILE:-}" ] && run gpt2_torch_compile 240 python3 bench/cuda_torch.py --gpt2 compile
fi
if want kernels; then  # GPT-2's op table with every launch synchronous (each op's host time is its whole GPU
  # time, syncs included), and Nsight Compute's own duration of the loss and embedding-gradient kernels
  CUDA_LAUNCH_BLOCKING=1 timeout 120 "$bin/bench_cuda_gpt2" --batch 8 --steps 1 --profile > "$out/profile_gpt2_blocking.log" 2>&1
  summary "gpt2 blocking profile: rc=$?: $(grep -m4 -E '^  [a-z_]+ +[0-9]+ ' "$out/profile_gpt2_blocking.log" | awk '{print $1, $3 "ms"}' | tr '\n' ' ')"
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -n "$ncu" ]; then
    timeout 90 "$ncu" --kernel-name regex:'class_loss|embedding_|radix|DeviceRadix' --launch-skip 0 --launch-count 12 \
      --metrics gpu__time_duration.sum "$bin/bench_cuda_gpt2" --batch 8 --steps 1 > "$out/ncu_gpt2.log" 2>&1
    summary "ncu: rc=$?: $(grep -E 'class_loss|embedding_|Radix|gpu__time_duration' "$out/ncu_gpt2.log" | sed 's/  */ /g' | head -24 | tr '\n' '|')"
  else
    summary "ncu: not found"
  fi
fi
if want profile; then  # op tables with GPU spans (CUDA events): the host's and the device's time per op
  { "$bin/bench_cuda" --profile gpt-mini; "$bin/bench_cuda" --profile lstm-lm; } > "$out/profile.log" 2>&1
fi
if want compile; then  # torch.compile's CUDA-graph mode (the peer of oar's static+graphs), last: it is slow
  TORCH_COMPILE_MODES=${TORCH_COMPILE_MODES:-reduce-overhead} run torch_compile 240 python3 bench/cuda_torch.py --compile
fi
if want memcheck; then
  san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # the compiled zoo comparison for two models only under memcheck (OAR_TEST_CUDA_QUICK), to keep its time
  OAR_TEST_CUDA_QUICK=1 run memcheck_test_cuda 240 "$san" --tool memcheck --report-api-errors no --error-exitcode 9 "$bin/tests/test_cuda"
  run memcheck_sweep 240 "$san" --tool memcheck --report-api-errors no --error-exitcode 9 "$bin/tests/sweep" --device cuda --no-low-precision
fi
cat "$out"/bench_*.log "$out"/gpt2_*.log 2>/dev/null
# some machines send back at most 8 files: the logs travel as one archive beside the summary
tar czf "$out/logs.tgz" -C "$out" $(cd "$out" && ls *.log) && rm -f "$out"/*.log
