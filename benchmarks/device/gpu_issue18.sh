#!/usr/bin/env bash
# Issue 18 on one CUDA device: every test file that runs on CUDA run alone three times, the whole
# reference_impl + runtime suite under xdist three times, and the capture regression test
# with the collector pause removed (it must fail then). Logs go to $OUT. PART=alone runs the
# first part only, PART=suite the other two (one device call may not hold both).
source benchmarks/device/setup.sh
if [ "${PART:-all}" != suite ]; then
# Each file that runs on CUDA, in three fresh processes at once (each alone in its process).
for file in tests/runtime/test_gpu.py tests/runtime/test_reference_impl.py tests/reference_impl/test_bug_switches.py tests/reference_impl/test_serving.py tests/reference_impl/test_kernels.py tests/reference_impl/test_pool.py; do
  name=$(basename $file .py)
  for run in 1 2 3; do
    timeout 300 python3 -m pytest $file -q -p no:cacheprovider > $OUT/alone-$name-$run.log 2>&1 &
  done
  wait
  for run in 1 2 3; do echo "alone $run $file: $(tail -1 $OUT/alone-$name-$run.log)"; done
done
fi
[ "${PART:-all}" = alone ] && exit 0
for run in 1 2 3; do
  echo "suite $run: $(timeout 300 python3 -m pytest tests/reference_impl tests/runtime -q -n 8 -p no:cacheprovider 2>&1 | tee -a $OUT/suite.log | tail -1)"
done
timeout 60 python3 -m pytest tests/reference_impl tests/runtime -q -m gpu -p no:cacheprovider --co 2>&1 | tail -1
echo "== control: the collector pause removed"
cp runtime/checks.py /tmp/checks.py.bak
sed -i 's/^            gc.disable()$/            pass/' runtime/checks.py
grep -c "gc.disable()" runtime/checks.py
for run in 1 2 3; do
  echo "control $run: $(timeout 120 python3 -m pytest tests/runtime/test_gpu.py -q -p no:cacheprovider -k survives 2>&1 | tee -a $OUT/control.log | tail -1)"
done
cp /tmp/checks.py.bak runtime/checks.py
