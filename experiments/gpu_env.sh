# Sourced by the prepared device runs (gpu_check.sh, gpu_pipeline.sh): the data folder ($1),
# the output folder ($OUT), the image's python3 ($PYTHON), and what the machine has.
set -euo pipefail
DATA=${1:-.gpu_data}
OUT=${OUT:-experiments/results}
PY=${PYTHON:-python3}
export PYTHONPATH=. PYTHONUNBUFFERED=1 OPENBLAS_NUM_THREADS=1
mkdir -p "$OUT"
$PY -c "import jax, flax, optax; print('jax', jax.__version__, 'flax', flax.__version__, jax.devices())"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
