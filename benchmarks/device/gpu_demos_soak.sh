#!/usr/bin/env bash
# Demos (every bug switch at both levels, 40 steps) and the soak (SOAK_STEPS, default 10,000) on one H100.
source benchmarks/device/setup.sh
echo "== demos"
for bug in none padding-not-zeroed swa-loc-int64 missing-invalidation storage-pointer-key capture-without-invalidation invalidate-after-dispatch fresh-translation-without-flush; do
  extra=""; [ "$bug" != none ] && extra="--inject-bug $bug"
  for lvl in fast full; do
    line=$(timeout 60 python3 -m swacheck.reference_impl.demo --device cuda --steps 40 --sanitize $lvl $extra --json 2>/dev/null | tail -1)
    echo "$bug $lvl $line" >> $OUT/demos.log
    echo "$bug $lvl $(echo "$line" | python3 -c 'import json,sys
try:
    d=json.loads(sys.stdin.read())
    print(d.get("max_abs_diff"), d.get("first_divergent_step"), {k: v for k, v in (d.get("violations") or {}).items() if v})
except Exception as e: print("unparsed", e)')"
  done
done
echo "== soak"
timeout 330 python3 benchmarks/soak_sanitizer.py --device cuda --steps ${SOAK_STEPS:-10000} --level fast 2>&1 | tee $OUT/soak.log | tail -8
echo "exit ${PIPESTATUS[0]}"
