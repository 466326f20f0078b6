#!/usr/bin/env bash
# Copies the small libraries a GPU machine may lack (cJSON: model files, so the predictor and
# model-file checks run there instead of skipping) into device-deps/, a folder the device tool
# carries with the working tree (`carry: ["device-deps"]`); run_on_device.sh builds against it.
#   Usage: tests/cuda/pack_device_deps.sh
set -eu
cd "$(dirname "$0")/../.."
rm -rf device-deps
mkdir -p device-deps/include device-deps/lib
cp -r /usr/include/cjson device-deps/include/
cp -P /usr/lib/x86_64-linux-gnu/libcjson.so* device-deps/lib/
echo "device-deps: $(du -sh device-deps | cut -f1) (cJSON $(ls device-deps/lib | tr '\n' ' '))"
