#!/usr/bin/env bash
# What `smelt compile --autotune max` gains over the cost model's kernels on the public
# models: for each case, compiles a default artifact and a tuned one (timing the tuned
# compile), then benches the two interleaved, ROUNDS rounds of DURATION seconds each at
# THREADS threads, and prints each p50 and the median of the per-round ratios.
# Usage: scripts/autotune-gain.sh [case ...]   (default: the five public cases)
# Needs the models of scripts/fetch-test-data.sh and a release build of smelt.
set -euo pipefail
SMELT=${SMELT:-target/release/smelt}
DATA=${DATA:-$HOME/.cache/smelt/data/models}
THREADS=${THREADS:-2}; ROUNDS=${ROUNDS:-6}; DURATION=${DURATION:-3}
OUT=${OUT:-target/autotune-gain}
mkdir -p "$OUT"
cases=("$@"); [ ${#cases[@]} -gt 0 ] || cases=(resnet50 minilm-b1 minilm-b8 yolov8n ppocr-det)
p50() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['smelt']['latency_ms']['p50'])" "$1"; }
for c in "${cases[@]}"; do
  case $c in
    resnet50) shp=();;
    minilm-b1) shp=(--shape input_ids=1x128 --shape attention_mask=1x128);;
    minilm-b8) shp=(--shape input_ids=8x128 --shape attention_mask=8x128);;
    yolov8n) shp=(--shape images=1x3x320x320);;
    ppocr-det) shp=(--shape x=1x3x640x640);;
    *) echo "unknown case $c" >&2; exit 2;;
  esac
  m="$DATA/$c/model.onnx"
  "$SMELT" compile "$m" "${shp[@]}" --threads "$THREADS" -o "$OUT/$c-default.smelt" >/dev/null
  t0=$(date +%s.%N)
  said=$("$SMELT" compile "$m" "${shp[@]}" --threads "$THREADS" --autotune max --tuning-cache none -o "$OUT/$c-max.smelt" | grep 'autotune max')
  t1=$(date +%s.%N)
  echo "$c: tuned compile $(python3 -c "print(f'{$t1-$t0:.1f}')") s;$said"
  ratios=()
  for r in $(seq "$ROUNDS"); do
    for v in default max; do
      "$SMELT" bench "$OUT/$c-$v.smelt" --threads "$THREADS" --duration "$DURATION" --json "$OUT/$c-$v.json" >/dev/null 2>&1
    done
    a=$(p50 "$OUT/$c-default.json"); b=$(p50 "$OUT/$c-max.json")
    ratios+=("$a/$b")
  done
  python3 - "$c" "${ratios[@]}" <<'PY'
import sys, statistics as st
c, pairs = sys.argv[1], [tuple(map(float, p.split("/"))) for p in sys.argv[2:]]
print(f"  {c}: p50 default/max per round: " + " ".join(f"{a:.2f}/{b:.2f}" for a, b in pairs))
print(f"  {c}: median default {st.median(a for a, _ in pairs):.2f} ms, max {st.median(b for _, b in pairs):.2f} ms, median ratio max/default {st.median(b / a for a, b in pairs):.3f}")
PY
done
