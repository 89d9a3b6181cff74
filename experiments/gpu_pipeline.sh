#!/usr/bin/env bash
# The paper's headline as ONE prepared device run: InfiniteMNIST at 1,000,000 samples, the whole
# pipeline (sample generation, autoencoders, Siamese nets, SpecRaGE, evaluation) with every stage's
# training data in device memory (train.data_on_device), one `specrage train` per size through
# experiments/infinitemnist_curve.py. Target on one H100/H200: <= 6 min wall, test k-means ACC >= 0.991.
#
# From this machine (the data directory does not travel; copy MNIST into an ignored folder):
#   mkdir -p .gpu_data && cp -r DATA/mnist .gpu_data/
#   device run: command "bash experiments/gpu_pipeline.sh .gpu_data", carry [".gpu_data"], timeout_s 480
# SIZES and SEEDS (space-separated) change what runs: SIZES="2000" SEEDS="0" checks it on a CPU.
# The curve's JSON (the committed CPU points plus this run's) and its figure land in $OUT.
# Uses the image's python3 (jax/flax/optax/chex/orbax preinstalled there), not this repo's venv.
# shellcheck source=experiments/gpu_env.sh
source experiments/gpu_env.sh "${1:-.gpu_data}"
if [ "$OUT" != experiments/results ]; then cp experiments/results/infinitemnist_curve.json "$OUT/"; fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/infinitemnist_curve.XXXXXX")  # each run its own: two runs never share files
trap 'rm -rf "$WORK"' EXIT
# shellcheck disable=SC2086  # SIZES and SEEDS are lists
$PY experiments/infinitemnist_curve.py --data-dir "$DATA" --sizes ${SIZES:-1000000} --seeds ${SEEDS:-0} \
    --set train.data_on_device=true --work-dir "$WORK" \
    --json "$OUT/infinitemnist_curve.json" --figure "$OUT/infinitemnist_curve.png"
