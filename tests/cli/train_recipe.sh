#!/bin/sh
# oar train's per-model defaults (tools/oar/train_recipe.c): the recipe is printed at the start
# and used for every option not given; options given override it. LeNet on Fashion-MNIST is
# the main job's recipe (make run passes no hyperparameters). Short runs (--steps 1).
# Usage: train_recipe.sh OAR_BINARY SHARED_DIR
set -eu
oar=$1
shared=$2
export OAR_SHARED_DIR=$shared
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
has() { grep -q -- "$1" "$dir/out" || { echo "train_recipe: no '$1' in: $(cat "$dir/out")"; exit 1; }; }
run() { "$oar" train "$@" --steps 1 --threads 1 --quiet --checkpoint "$dir/c.safetensors" > "$dir/out"; }
checked=0

if [ -f "$shared/data/sklearn/digits_train.csv" ]; then
  run --model tiny --data digits
  has "^recipe: tiny's defaults (the common ones): 2 epochs, batch 64, sgd lr 0.05, label smoothing 0 "
  has "^training: 2 epochs of [0-9]* steps, batch 64, sgd lr 0.05 "
  run --model tiny --data digits --batch 32 --optimizer adam
  has "^training: 2 epochs of [0-9]* steps, batch 32, adam lr 0.001 "
  checked=$((checked + 1))
fi
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
   [ -f "$shared/data/fashion-mnist/train-first20000-images-idx3-ubyte.gz" ]; then
  run --model lenet --data fashion-mnist
  has "^recipe: lenet's defaults: 3 epochs, batch 16, sgd lr 0.02, label smoothing 0.1 "
  has "^training: 3 epochs of [0-9]* steps, batch 16, sgd lr 0.02 "
  run --model lenet --data fashion-mnist --epochs 1 --batch 32 --lr 0.01
  has "^training: 1 epochs of [0-9]* steps, batch 32, sgd lr 0.01 "
  checked=$((checked + 1))
fi
if [ $checked = 0 ]; then
  echo "train_recipe: skipped: neither the digits nor Fashion-MNIST found"
  exit 0
fi
# a bad value is still refused after the recipe fills the rest
if "$oar" train --model lenet --data fashion-mnist --batch 0 2> "$dir/out"; then exit 1; fi
has "batch expects a whole number >= 1"
if "$oar" train --model lenet --data fashion-mnist --label-smoothing -0.5 2> "$dir/out"; then exit 1; fi
has "label-smoothing expects a value in \[0, 1)"
echo "train_recipe: 1 passed, 0 failed"
