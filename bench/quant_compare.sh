#!/bin/sh
# oar's int8 inference beside PyTorch's (fbgemm) on the same models, in one run: for each model,
# batch and quantization (none, dynamic, static) it runs `oar bench --workload quant-infer` and
# bench/quant_torch.py alternately and prints one JSON line with both medians, the spread, and
# the ratios torch/oar (> 1: oar is faster) and fp32/int8 within each framework.
# The token models (lstm-lm, gpt-mini) have no static row: dynamic is what both frameworks offer
# for LSTM and attention models.
# Usage: bench/quant_compare.sh [BUILD_DIR] [THREADS] [REPEATS] [MODELS]
#   MODELS: a space-separated list, default "lenet mlp resnet20 lstm-lm gpt-mini"
set -eu
build=${1:-build}
threads=${2:-2}
repeats=${3:-7}
models=${4:-lenet mlp resnet20 lstm-lm gpt-mini}
here=$(dirname "$0")
field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
for model in $models; do
  calls=; [ $model = resnet20 ] && calls="--calls 5" # PyTorch's fp32 ResNet-20 takes ~50 ms an image here
  quants="none dynamic static"
  case $model in lstm-lm|gpt-mini) quants="none dynamic"; calls="--calls 3";; esac
  for batch in 1 32; do
    oar_fp32=; torch_fp32=
    for quant in $quants; do
      o=$("$build/oar" bench --workload quant-infer --model $model --quant $quant --batch $batch --threads "$threads" --repeats "$repeats" $calls)
      t=$(/usr/bin/python3 "$here/quant_torch.py" --model $model --quant $quant --batch $batch --threads "$threads" --repeats "$repeats" $calls)
      om=$(echo "$o" | field ms_median); tm=$(echo "$t" | field ms_median)
      [ $quant = none ] && oar_fp32=$om && torch_fp32=$tm
      python3 -c "
import json, sys
om, tm, of, tf = map(float, sys.argv[1:5])
o, t = json.loads(sys.argv[5]), json.loads(sys.argv[6])
print(json.dumps({'model': o['model'], 'batch': o['batch'], 'quant': o['quant'], 'threads': o['threads'],
                  'oar_ms': om, 'oar_spread': [o['ms_min'], o['ms_max']], 'torch_ms': tm,
                  'torch_spread': [t['ms_min'], t['ms_max']], 'torch_engine': t['engine'], 'torch_over_oar': round(tm / om, 2),
                  'oar_fp32_over_this': round(of / om, 2), 'torch_fp32_over_this': round(tf / tm, 2)}))
" "$om" "$tm" "$oar_fp32" "$torch_fp32" "$o" "$t"
    done
  done
done
