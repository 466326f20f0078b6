# Shared by the ONNX case runners (node_cases.sh, control_cases.sh, quant_cases.sh); sourced
# after they set oar (the binary), src (the source dir), out (a scratch file) and fail=0.

# run_cases TEST SET: `oar onnx-test` over tests/onnx/SET with SET_pass.txt expected to pass;
# exits 77 (skipped) in a build without ONNX import; sets fail=1 on a wrong answer or a listed
# case that no longer passes.
run_cases() {
  set +e
  "$oar" onnx-test "$src/tests/onnx/$2" --expect "$src/tests/onnx/$2_pass.txt" > "$out" 2>&1
  rc=$?
  set -e
  if grep -q "built without protobuf-c" "$out"; then
    echo "$1: skipped: oar was built without protobuf-c (no ONNX import)"
    exit 77
  fi
  sed -n '/^operator /,$p' "$out"
  if grep -q "^FAIL" "$out" || [ "$rc" -ne 0 ]; then
    grep "^FAIL\|REGRESSION" "$out" || cat "$out"
    fail=1
  fi
}

# check_refusals TEST DIR: each malformed model DIR/NAME.onnx listed in DIR/expected.txt
# (NAME<tab>text) must be refused by `oar inspect` with a message containing its text.
check_refusals() {
  n=0
  tab=$(printf '\t')
  while IFS="$tab" read -r name want; do
    case "$name" in ''|'#'*) continue ;; esac
    n=$((n + 1))
    set +e
    "$oar" inspect "$2/$name.onnx" > "$out" 2>&1
    rc=$?
    set -e
    if [ "$rc" -eq 0 ] || ! grep -qF -- "$want" "$out"; then
      echo "FAIL malformed $name: expected a refusal containing '$want', got (exit $rc):"
      head -c 600 "$out"; echo
      fail=1
    fi
  done < "$2/expected.txt"
  echo "$1: $n malformed models checked"
}
