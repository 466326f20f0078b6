#!/bin/sh
# Every subcommand of oar refuses an unknown flag, a missing value and a malformed number with
# exit status 2 and the list of its valid flags, before it does any work (issue 13: a typo such
# as --threds ran the default benchmark and exited 0).
# Usage: flags.sh OAR_BINARY
set -eu
oar=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
n=0
# refused CMD... : the command exits 2 and stderr has the given text and the flag list
refused() {
  want=$1
  shift
  set +e
  "$oar" "$@" > "$dir/out" 2> "$dir/err"
  rc=$?
  set -e
  if [ "$rc" -ne 2 ]; then echo "flags: 'oar $*' exited $rc, expected 2: $(cat "$dir/err")"; exit 1; fi
  grep -q -- "$want" "$dir/err" || { echo "flags: 'oar $*': no '$want' in: $(cat "$dir/err")"; exit 1; }
  test ! -s "$dir/out" || { echo "flags: 'oar $*' printed: $(cat "$dir/out")"; exit 1; }
  n=$((n + 1))
}
for cmd in train eval sample export infer inspect ops profile launch; do
  refused "unknown flag '--bogus'" $cmd --bogus 1
  grep -q "valid flags:" "$dir/err"
done
for w in dispatch gemm peak resnet20-infer tiny mlp lenet resnet20 gpt-mini lstm-lm; do
  refused "unknown flag '--threds'" bench --workload $w --threds 1
  grep -q "valid flags: --workload" "$dir/err"
  refused "unknown flag '--quant'" bench --workload $w --quant static
done
# flags a workload does not have
refused "unknown flag '--batch'" bench --workload dispatch --batch 4
refused "unknown flag '--context'" bench --workload tiny --context 8
refused "unknown flag '--compare-torch'" bench --workload tiny --compare-torch
refused "needs --mode static" bench --workload tiny --disable-pass fuse_attention
# malformed and missing values
refused "--batch expects a whole number >= 1, got '12x'" bench --workload tiny --batch 12x
refused "--batch expects a whole number >= 1, got '0'" bench --workload resnet20-infer --batch=0
refused "--threads expects a whole number >= 1, got 'two'" bench --workload gemm --threads two
refused "--steps expects a value" bench --workload tiny --steps
refused "--lr expects a number, got 'fast'" train --model tiny --data digits --lr fast
refused "--epochs expects a whole number >= 1" train --model tiny --data digits --epochs 2x
refused "--temperature expects a number" sample --temperature hot
refused "unexpected argument 'yes'" inspect model --passes=yes
refused "unexpected argument 'extra'" inspect model extra
refused "unexpected argument 'lenet'" export lenet --model lenet
refused "the model's context" bench --workload gpt-mini --context 4096
# the --flag=value form is the same flag
"$oar" bench --workload tiny --steps=1 --threads=1 --batch=4 > "$dir/out"
grep -q '"batch": 4' "$dir/out"
echo "flags: $n passed, 0 failed"
