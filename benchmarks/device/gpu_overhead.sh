#!/usr/bin/env bash
# The sanitizer's overhead on one CUDA device, side by side in one call: the tiny model
# (host-bound worst case) twice, then the realistic-size model once. Logs go to $OUT.
source benchmarks/device/setup.sh
echo "== tiny"
for i in 1 2; do
  timeout 150 python3 benchmarks/bench_sanitizer_overhead.py --device cuda --steps 300 2>&1 | tee $OUT/tiny$i.log | grep -E "^(eager|graph) " | cut -c1-170
done
echo "== realistic"
timeout 300 python3 benchmarks/bench_sanitizer_overhead.py --device cuda --workload realistic --steps 100 2>&1 | tee $OUT/realistic.log | grep -E "^(eager|graph) " | cut -c1-170
