# Sourced by the device scripts, from the repository root: the wheels of .whl/ (the device
# machines have no network) on PYTHONPATH, swacheck installed editable, and what machine
# and versions this is. The scripts run with pipefail.
set -o pipefail
if [ ! -d /tmp/site/libcst ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
