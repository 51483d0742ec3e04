#!/usr/bin/env bash
# The GPU tests on one CUDA device: each test file of tests/runtime and tests/reference_impl
# alone in a fresh process with empty Triton and inductor caches of its own (a test that
# passes only warm, or after others ran, fails here; four files at a time), then the whole
# suite under xdist on fresh caches. Logs go to $OUT.
source benchmarks/device/setup.sh
export OUT
alone() {
  export TRITON_CACHE_DIR=$(mktemp -d) TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)
  log=$OUT/alone-$(basename $1 .py).log
  timeout 300 python3 -m pytest $1 -q -p no:cacheprovider -rs > $log 2>&1
  echo "alone $1: $(tail -1 $log)"
}
export -f alone
ls tests/runtime/test_*.py tests/reference_impl/test_*.py | xargs -P 4 -I{} bash -c 'alone {}'
export TRITON_CACHE_DIR=$(mktemp -d) TORCHINDUCTOR_CACHE_DIR=$(mktemp -d)
echo "suite: $(timeout 300 python3 -m pytest tests/reference_impl tests/runtime -q -n 8 -p no:cacheprovider -rs 2>&1 | tee $OUT/suite.log | tail -1)"
echo "gpu-marked: $(timeout 60 python3 -m pytest tests/reference_impl tests/runtime -q -m gpu -p no:cacheprovider --co 2>&1 | tail -1)"
