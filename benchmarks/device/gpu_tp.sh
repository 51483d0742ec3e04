#!/usr/bin/env bash
# Tensor-parallel run on a 2-GPU machine (2xH200), from the repository root: bash benchmarks/device/gpu_tp.sh
#  1. tests/distributed on NCCL with CUDA graphs per rank: TP demo == dense oracle, every
#     bug switch caught on both ranks with one merged report (per-rank counts in the log),
#     a raise on one rank ends the run, the pytest plugin's two-rank fixture;
#  2. swacheck demo --tp 2 (bf16, 40 steps, fast sanitizer);
#  3. benchmarks/bench_tp.py: fast vs unsanitized TP decode, side by side (one JSON line).
# Logs under $OUT. Each step has its own time limit (SIGINT first, so launches kill their
# ranks); all of them together stay under 8 minutes.
set -o pipefail
# NVLink multicast stays off (the machine's policy), also for every rank torchrun starts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ ! -d /tmp/site/libcst ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())"
} 2>&1 | tee $OUT/gpu_tp_env.log

echo "== tests/distributed (NCCL, CUDA graphs)"
timeout -s INT -k 10 200 python3 -m pytest tests/distributed -p no:cacheprovider -rA -v --durations=10 2>&1 \
  | tee $OUT/gpu_tp_tests.log | grep -E "PASSED|FAILED|ERROR|passed|failed|^bug |[0-9.]+s (call|setup)" | tail -40
echo "exit ${PIPESTATUS[0]}" | tee -a $OUT/gpu_tp_tests.log

echo "== swacheck demo --tp 2 --device cuda --dtype bfloat16 --steps 40 --sanitize fast"
timeout -s INT -k 10 60 python3 -m swacheck demo --tp 2 --device cuda --dtype bfloat16 --steps 40 \
  --sanitize fast --quiet --json > $OUT/gpu_tp_demo.log 2>&1
echo "exit $?" | tee -a $OUT/gpu_tp_demo.log
grep -E "^swa-sanitizer|^  rank" $OUT/gpu_tp_demo.log
grep '^{' $OUT/gpu_tp_demo.log | tail -1 | cut -c1-700

echo "== benchmarks/bench_tp.py (fast vs off, eager and graph)"
timeout -s INT -k 10 120 python3 -m torch.distributed.run --standalone --nproc-per-node 2 \
  benchmarks/bench_tp.py > $OUT/bench_tp.log 2>&1
echo "exit $?" | tee -a $OUT/bench_tp.log
grep '^{' $OUT/bench_tp.log | tail -1
