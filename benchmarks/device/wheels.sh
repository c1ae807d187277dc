#!/usr/bin/env bash
# The packages a GPU device machine lacks for benchmarks/device/gpu.sh, as cp312 wheels in .whl/
# (git-ignored; the device tool carries it). The device has Python 3.12, torch, numpy, pandas, onnx,
# onnxruntime, rich, tqdm, cloudpickle, matplotlib and seaborn; versions here are constraints.txt's.
#   bash benchmarks/device/wheels.sh      (then run gpu.sh's command with carry=[".whl"])
set -euo pipefail
cd "$(dirname "$0")/../.."
pin() { grep -i "^$1==" constraints.txt | head -1; }
rm -rf .whl && mkdir -p .whl
for name in gymnasium Farama-Notifications hydra-core omegaconf antlr4-python3-runtime stable_baselines3 ale-py; do
  spec=$(pin "$name")
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${spec:-$name}" 2>/dev/null \
  || python3 -m pip wheel -q --no-deps -w .whl "${spec:-$name}"  # published as a pure-Python sdist only: built here
done
ls -la .whl && du -sh .whl
