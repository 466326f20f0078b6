#!/usr/bin/env bash
# Installs the Debian packages oar builds with, when they are missing. As root it installs
# them with apt-get and says what it did; otherwise it lists what is missing (oar still
# builds without the optional ones, using its portable kernels).
set -euo pipefail

required=(build-essential cmake pkg-config)
optional=(libopenblas-dev libdnnl-dev libcjson-dev zlib1g-dev libopenmpi-dev openmpi-bin libprotobuf-c-dev
          protobuf-c-compiler iproute2)  # iproute2: the namespace hosts of bench/netns_hosts.sh
data=(dataset-fashion-mnist)  # the main job's data: /usr/share/datasets/fashion-mnist
# the Python front end (python/, docs/python.md): headers to build oar._C, and what its tests
# use; python3-torch is the oracle the parity tests compare with (they skip without it), and
# python3-torchvision gives the real models the ONNX tests export; python3-torchvision and
# python3-torchaudio hold the model files test_torchvision.py / test_torchaudio.py run unmodified;
# python3-onnx's checker checks the models oar exports (onnx_export_check); python3-mpmath gives
# the true values test_special_functions.py compares torch.special's ops with
python=(python3-dev python3-numpy python3-pytest python3-setuptools python3-pip python3-torch python3-torchvision
        python3-torchaudio python3-onnx python3-mpmath)

missing=()
for p in "${required[@]}" "${optional[@]}" "${data[@]}" "${python[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present (${required[*]} ${optional[*]} ${data[*]} ${python[*]})"
  exit 0
fi

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "setup: installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: installed ${missing[*]}"
else
  echo "setup: missing packages: ${missing[*]}"
  echo "setup: run 'sudo apt-get install ${missing[*]}' for the fast kernels; continuing without them"
fi
