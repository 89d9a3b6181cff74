#!/usr/bin/env bash
# The GPU check as ONE prepared device run (sized for a 15-minute device budget):
#   1. bench_steps: the 784-d two-view step at batch 1024 (both R^-1 modes) on the accelerator;
#   2. bench_scaling --on-device: InfiniteMNIST 100k and 1M, the paper's autoencoder pre-embedding,
#      then 25 SpecRaGE epochs with the training codes in device memory (train.data_on_device:
#      one compiled lax.scan per epoch). Target: 25 epochs over 1,000,000 samples < 2 min (H100).
#
# From this machine (the data directory does not travel; copy MNIST into an ignored folder):
#   mkdir -p .gpu_data && cp -r DATA/mnist .gpu_data/
#   device run: command "bash experiments/gpu_check.sh .gpu_data", carry [".gpu_data"], timeout_s 540
# The JSON files land in $OUT (the device tool brings them back); without .gpu_data/mnist the
# images are random stand-ins (--fake-mnist: same sizes and costs, no accuracy meaning).
# Uses the image's python3 (jax/flax/optax/chex/orbax preinstalled there), not this repo's venv.
# shellcheck source=experiments/gpu_env.sh
source experiments/gpu_env.sh "${1:-.gpu_data}"
if [ -d "$DATA/mnist" ]; then SRC=(--data-dir "$DATA"); else SRC=(--fake-mnist); fi
$PY experiments/bench_steps.py --repeats 5 --iters 50 --cases 784 --modes True False \
    --json "$OUT/bench_steps_gpu.json" 2>&1 | tail -25
$PY experiments/bench_scaling.py --sizes 100000 1000000 --ae --on-device --epochs 25 --no-exact "${SRC[@]}" \
    --work-dir /tmp/bench_scaling_gpu --json "$OUT/bench_scaling_gpu_on_device.json" 2>&1 | tail -40
