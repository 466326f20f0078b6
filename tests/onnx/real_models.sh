#!/bin/sh
# Real models exported by PyTorch (torchvision resnet18, mobilenet_v2, squeezenet1_1, a
# TransformerEncoder classifier, a 2-layer LSTM, and nine more torchvision architectures below;
# tests/onnx/torch_models.py, random seeded
# weights) run by `oar infer model.onnx` and compared with PyTorch's outputs on the same input:
# |oar - torch| <= 1e-3 |torch| + 1e-4 max|torch|. The CNNs also run at 1, 2 and 3 threads, which
# must give the same bits (at batch 1 their convs run as row parts on the threads, conv_dnnl.c).
# squeezenet1_1 and mobilenet_v2 also run at batch 8, where their first layers run as batch
# tiles (src/graph/batch_tiles.c: one image per slice at 1 thread, two at 2): the same bits at 1
# and 2 threads and the same tolerance against torch.
# Skips (77) without Debian's python3 with torch and torchvision, or without ONNX support in the
# build.
# Usage: real_models.sh OAR_BINARY SOURCE_DIR
set -eu
oar=$1
src=$2
py=/usr/bin/python3
if ! [ -x "$py" ] || ! "$py" -c "import torch, torchvision, numpy" 2>/dev/null; then
  echo "onnx_real_models: skipped: $py with torch, torchvision and numpy not found"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$py" "$src/tests/onnx/torch_models.py" "$dir" --batch 1 2> "$dir/export.log" || { cat "$dir/export.log"; exit 1; }
for m in resnet18 mobilenet_v2 squeezenet1_1 transformer lstm; do
  if ! "$oar" infer "$dir/$m.onnx" --input "$dir/$m.x.npy" --output "$dir/$m.oar.npy" > "$dir/$m.log" 2>&1; then
    if grep -q "built without protobuf-c" "$dir/$m.log"; then
      echo "onnx_real_models: skipped: oar was built without protobuf-c (no ONNX import)"
      exit 77
    fi
    echo "onnx_real_models: oar infer $m.onnx failed:"; cat "$dir/$m.log"; exit 1
  fi
done
for m in resnet18 mobilenet_v2 squeezenet1_1; do
  for t in 1 2 3; do
    "$oar" infer "$dir/$m.onnx" --input "$dir/$m.x.npy" --output "$dir/$m.t$t.npy" --threads $t > "$dir/$m.t$t.log" 2>&1 ||
      { echo "onnx_real_models: oar infer $m.onnx --threads $t failed:"; cat "$dir/$m.t$t.log"; exit 1; }
  done
  for t in 2 3; do
    cmp -s "$dir/$m.t1.npy" "$dir/$m.t$t.npy" || { echo "onnx_real_models: $m at $t threads differs from 1 thread"; exit 1; }
  done
  echo "$m: the same bits at 1, 2 and 3 threads"
done
mkdir "$dir/b8"
"$py" "$src/tests/onnx/torch_models.py" "$dir/b8" --batch 8 --models squeezenet1_1,mobilenet_v2 2> "$dir/export8.log" ||
  { cat "$dir/export8.log"; exit 1; }
for m in squeezenet1_1 mobilenet_v2; do
  for t in 1 2; do
    "$oar" infer "$dir/b8/$m.onnx" --input "$dir/b8/$m.x.npy" --output "$dir/b8/$m.t$t.npy" --threads $t > "$dir/b8/$m.log" 2>&1 ||
      { echo "onnx_real_models: oar infer $m.onnx (batch 8) --threads $t failed:"; cat "$dir/b8/$m.log"; exit 1; }
  done
  cmp -s "$dir/b8/$m.t1.npy" "$dir/b8/$m.t2.npy" || { echo "onnx_real_models: $m at batch 8 differs at 2 threads"; exit 1; }
  cp "$dir/b8/$m.t1.npy" "$dir/b8/$m.oar.npy"
  echo "$m (batch 8, tiles): the same bits at 1 and 2 threads"
done
# More architectures (torch_models.py's ZOO: squeeze-excite, HardSwish, channel shuffle, grouped
# and 7x7 depthwise convs, shifted-window attention, dense concats, inception branches, a
# segmentation head with Resize; and MaxPool's Indices output, as torch exports return_indices) at
# batch 1.
zoo="efficientnet_b0 mobilenet_v3_small shufflenet_v2_x0_5 regnet_y_400mf convnext_tiny swin_t densenet121 googlenet
lraspp_mobilenet_v3_large pool_indices"
mkdir "$dir/zoo"
"$py" "$src/tests/onnx/torch_models.py" "$dir/zoo" --batch 1 --models "$(echo $zoo | tr ' ' ',')" 2> "$dir/export_zoo.log" ||
  { cat "$dir/export_zoo.log"; exit 1; }
for m in $zoo; do
  "$oar" infer "$dir/zoo/$m.onnx" --input "$dir/zoo/$m.x.npy" --output "$dir/zoo/$m.oar.npy" > "$dir/zoo/$m.log" 2>&1 ||
    { echo "onnx_real_models: oar infer $m.onnx failed:"; cat "$dir/zoo/$m.log"; exit 1; }
done
"$py" - "$dir" $zoo <<'PY'
import sys
import numpy as np
d = sys.argv[1]
bad = 0
zoo = ["zoo/" + m for m in sys.argv[2:]]
for m in ["resnet18", "mobilenet_v2", "squeezenet1_1", "transformer", "lstm", "b8/squeezenet1_1", "b8/mobilenet_v2"] + zoo:
    got, want = np.load(f"{d}/{m}.oar.npy"), np.load(f"{d}/{m}.y.npy")
    scale = float(np.abs(want).max())
    err = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
    ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-4 * scale)
    print(f"{m:30s} shape {got.shape} max|oar - torch| {err:.3g} (max|torch| {scale:.3g}) {'ok' if ok else 'MISMATCH'}")
    bad += not ok
sys.exit(1 if bad else 0)
PY
