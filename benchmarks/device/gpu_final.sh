#!/usr/bin/env bash
# GPU validation on one CUDA device: every reference_impl/runtime test (GPU-marked ones included),
# the GPU-marked ones listed, then the sanitizer overhead benchmark twice.
source benchmarks/device/setup.sh
echo "== tests"
timeout 300 python3 -m pytest tests/reference_impl tests/runtime -q -n 8 -p no:cacheprovider -rs 2>&1 | tee $OUT/gpu_tests.log | tail -6
timeout 60 python3 -m pytest tests/reference_impl tests/runtime -q -m gpu -p no:cacheprovider --co 2>&1 | tee $OUT/gpu_marked.log | tail -1
echo "== bench_sanitizer_overhead"
for i in 1 2; do
  timeout 130 python3 benchmarks/bench_sanitizer_overhead.py --device cuda --steps 300 2>&1 | tee $OUT/overhead$i.log | grep -E "^(eager|graph) " | cut -c1-150
done
