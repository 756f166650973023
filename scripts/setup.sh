#!/usr/bin/env bash
# Installs the Debian packages fusetune needs to build, test and run its
# examples. Installs only what is missing; uses sudo when not root.
#   scripts/setup.sh           build, test and example dependencies
#   scripts/setup.sh --bench   also the benchmark-only peers (oneDNN, Halide 14, OpenBLAS
#                              for PyTorch eager, node/npm for onnxruntime-node, torchvision
#                              for the CNN end-to-end models)
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  # scripts/build.sh links with lld
  lld
  libeigen3-dev libtbb-dev libxgboost-dev libsqlite3-dev libsqlitecpp-dev libbenchmark-dev libgtest-dev
  libonnx-dev libprotobuf-dev protobuf-compiler nlohmann-json3-dev libcli11-dev libfmt-dev
  # test data: models exported by PyTorch's ONNX exporter (scripts/gen_models.py)
  python3 python3-numpy python3-onnx python3-torch
  # the Python module (python/) and its tests (tests/python, pytest)
  pybind11-dev python3-dev python3-pytest
  # ONNX's backend node tests, run by tests/graph/onnx_backend_test.cpp (skipped when absent)
  libonnx-testdata
  # the sanitizer build and the libFuzzer harnesses of tests/fuzz (scripts/build.sh sanitize)
  clang libclang-rt-dev
  # `fusetune cluster` (Slurm's client commands) and its test on a throw-away local cluster
  # (tests/cluster/slurm_test.sh, scripts/slurm-local.sh; the daemons are started by the test)
  slurm-wlm munge
)

if [ "${1:-}" = "--bench" ]; then
  PACKAGES+=(libdnnl-dev libhalide14-0-dev libopenblas0-openmp python3-torchvision)
  # A machine may already have Node.js from elsewhere (NodeSource's nodejs,
  # which bundles npm and conflicts with Debian's npm package): use it.
  command -v node >/dev/null && command -v npm >/dev/null || PACKAGES+=(nodejs npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
