#!/bin/sh
# ONNX control flow (If, Loop) through `oar onnx-test`: the cases of tests/onnx/control_cases
# (written by tests/onnx/control_cases.py: expected outputs from onnxruntime) give no wrong
# answers and every case listed in control_cases_pass.txt passes; each malformed model of
# tests/onnx/control_bad is refused with the error expected.txt names; and where Debian's python3
# has torch, TorchScript loops, branches and a list built in a loop then stacked (sequences)
# exported by torch.onnx (tests/onnx/torch_control.py)
# give torch's outputs (|oar - torch| <= 1e-5 + 1e-4 |torch|). Skips (77) without ONNX support in
# the build.
# Usage: control_cases.sh OAR_BINARY SOURCE_DIR
set -eu
oar=$1
src=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
. "$src/tests/onnx/cases_lib.sh"
run_cases onnx_control_cases control_cases
check_refusals onnx_control_cases "$src/tests/onnx/control_bad"
py=/usr/bin/python3
if [ -x "$py" ] && "$py" -c "import torch, numpy" 2>/dev/null; then
  dir=$(mktemp -d)
  "$py" "$src/tests/onnx/torch_control.py" "$dir" > "$dir/export.log" 2>&1 || { cat "$dir/export.log"; rm -rf "$dir"; exit 1; }
  for spec in torch_for_if:x,n torch_while:x torch_list:x,n; do
    name=${spec%%:*}
    args=""
    k=0
    for input in $(echo "${spec#*:}" | tr ',' ' '); do
      args="$args --input $input=$dir/$name.in$k.npy"
      k=$((k + 1))
    done
    # shellcheck disable=SC2086
    if ! "$oar" infer "$dir/$name.onnx" $args --output "$dir/$name.oar.npy" > "$dir/$name.log" 2>&1; then
      echo "FAIL $name: oar infer failed:"; cat "$dir/$name.log"; fail=1
    fi
  done
  "$py" - "$dir" <<'PY' || fail=1
import os, sys
import numpy as np
d = sys.argv[1]
bad = 0
for m in ["torch_for_if", "torch_while", "torch_list"]:
    if not os.path.exists(f"{d}/{m}.oar.npy"):
        bad += 1
        continue
    got, want = np.load(f"{d}/{m}.oar.npy"), np.load(f"{d}/{m}.y.npy")
    ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5)
    err = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
    print(f"{m:14s} max|oar - torch| {err:.3g} {'ok' if ok else 'MISMATCH'}")
    bad += not ok
sys.exit(1 if bad else 0)
PY
  rm -rf "$dir"
else
  echo "onnx_control_cases: torch exports skipped: $py with torch not found"
fi
exit $fail
