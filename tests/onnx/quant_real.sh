#!/bin/sh
# A real quantized model: LeNet trained here on Fashion-MNIST (../shared/data), exported by oar,
# quantized by onnxruntime.quantization.quantize_static in the QDQ and QOperator formats, run by
# oar and onnxruntime (bench/onnx_quant.py --check): top-1 agreement >= 99% and oar's program on
# qconv2d/qlinear (the QDQ model with no float convolution or linear left). The python is
# $OAR_ORT_PYTHON (a venv with onnx >= 1.13 and onnxruntime); skips (77) without it, without the
# data, or without ONNX support in the build.
# Usage: quant_real.sh OAR_BINARY SOURCE_DIR
set -eu
py=${OAR_ORT_PYTHON:-}
if [ -z "$py" ] || ! [ -x "$py" ]; then
  echo "onnx_quant_real: skipped: set OAR_ORT_PYTHON to a python with onnx >= 1.13 and onnxruntime"
  exit 77
fi
if "$1" inspect /dev/null 2>&1 | grep -q "built without protobuf-c"; then
  echo "onnx_quant_real: skipped: oar was built without protobuf-c (no ONNX import)"
  exit 77
fi
exec "$py" "$2/bench/onnx_quant.py" --oar "$1" --shared "$2/../shared" --models lenet --eval 256 --check
