#!/usr/bin/env bash
# Issue 25 on one CUDA device, in parts that each fit one device call (≤ 9 minutes):
#   PART=alone-runtime     tests/runtime's CUDA files, each alone in 3 fresh processes
#   PART=alone-reference   tests/reference_impl's CUDA files, each alone in 3 fresh processes
#   PART=suite             tests/reference_impl + tests/runtime under xdist, 3 times
#   PART=control           the capture regression tests with the fix removed (must fail)
#   PART=bench-tiny        bench_sanitizer_overhead.py, tiny model, twice
#   PART=bench-realistic   bench_sanitizer_overhead.py, realistic model, once
# Every pytest process gets its own fresh TRITON_CACHE_DIR and TORCHINDUCTOR_CACHE_DIR (the
# H200 failure came with a cold Triton cache). Logs go to $OUT; a summary line per run on
# stdout. Run from the repository root: PART=alone-runtime bash benchmarks/device/gpu_issue25.sh
source benchmarks/device/setup.sh
PART=${PART:?set PART to one of: alone-runtime alone-reference suite control bench-tiny bench-realistic}

# A command with fresh, empty Triton and inductor cache folders of its own.
cold() {
  local dir
  dir=$(mktemp -d /tmp/cold.XXXXXX)
  TRITON_CACHE_DIR=$dir/triton TORCHINDUCTOR_CACHE_DIR=$dir/inductor "$@"
  local status=$?
  rm -rf "$dir"
  return $status
}

# Each file alone, in three fresh processes at once, each with cold caches.
alone() {
  for file in "$@"; do
    name=$(basename "$file" .py)
    for run in 1 2 3; do
      cold timeout 280 python3 -m pytest "$file" -q -p no:cacheprovider -rfE > "$OUT/alone-$name-$run.log" 2>&1 &
    done
    wait
    for run in 1 2 3; do echo "alone $run $file: $(tail -1 "$OUT/alone-$name-$run.log")"; done
  done
}

case $PART in
alone-runtime)
  alone tests/runtime/test_gpu.py tests/runtime/test_reference_impl.py
  ;;
alone-reference)
  alone tests/reference_impl/test_bug_switches.py tests/reference_impl/test_capture_gc.py \
    tests/reference_impl/test_serving.py tests/reference_impl/test_kernels.py \
    tests/reference_impl/test_pool.py
  ;;
suite)
  for run in 1 2 3; do
    echo "suite $run: $(cold timeout 170 python3 -m pytest tests/reference_impl tests/runtime -q -n 8 \
      -p no:cacheprovider -rfE 2>&1 | tee -a "$OUT/suite.log" | tail -1)"
  done
  timeout 60 python3 -m pytest tests/reference_impl tests/runtime -q -m gpu -p no:cacheprovider --co 2>&1 | tail -1
  ;;
control)
  # 1. The reference runner's fix removed (no collection and freeze around capture): the
  #    unsanitized regression tests must fail, with the capture error.
  cp reference_impl/graph_runner.py /tmp/graph_runner.py.bak
  sed -i 's/^        with gc_collected_and_frozen():$/        with contextlib.nullcontext():/' reference_impl/graph_runner.py
  echo "fix lines left: $(grep -c 'with gc_collected_and_frozen():' reference_impl/graph_runner.py)"
  for run in 1 2 3; do
    echo "control runner $run: $(cold timeout 150 python3 -m pytest tests/reference_impl/test_capture_gc.py -q \
      -p no:cacheprovider -k 'survives or dropped' 2>&1 | tee -a "$OUT/control-runner.log" | tail -1)"
  done
  grep -c "during capture\|capture" "$OUT/control-runner.log" | sed 's/^/capture errors mentioned: /'
  # 2. The sanitizer's collector pause removed as well: its capture test must fail too.
  cp runtime/checks.py /tmp/checks.py.bak
  sed -i 's/^            gc.disable()$/            pass/' runtime/checks.py
  echo "pause lines left: $(grep -c 'gc.disable()' runtime/checks.py)"
  for run in 1 2 3; do
    echo "control sanitizer $run: $(cold timeout 120 python3 -m pytest tests/runtime/test_gpu.py -q \
      -p no:cacheprovider -k survives 2>&1 | tee -a "$OUT/control-sanitizer.log" | tail -1)"
  done
  cp /tmp/checks.py.bak runtime/checks.py
  cp /tmp/graph_runner.py.bak reference_impl/graph_runner.py
  # 3. Both restored: the same tests pass.
  echo "restored: $(cold timeout 150 python3 -m pytest tests/reference_impl/test_capture_gc.py tests/runtime/test_gpu.py \
    -q -p no:cacheprovider -k 'survives or dropped' 2>&1 | tail -1)"
  ;;
bench-tiny)
  for i in 1 2; do
    timeout 200 python3 benchmarks/bench_sanitizer_overhead.py --device cuda --steps 300 2>&1 \
      | tee "$OUT/tiny$i.log" | grep -E "^(eager|graph) " | cut -c1-170
  done
  ;;
bench-realistic)
  timeout 420 python3 benchmarks/bench_sanitizer_overhead.py --device cuda --workload realistic --steps 100 2>&1 \
    | tee "$OUT/realistic.log" | grep -E "^(eager|graph) " | cut -c1-170
  ;;
*)
  echo "unknown PART=$PART" >&2
  exit 2
  ;;
esac
