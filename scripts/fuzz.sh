#!/usr/bin/env bash
# Fuzzing smelt with libFuzzer (no sanitizers: the stable toolchain builds it) on the
# targets in fuzz/: onnx_import (decode+import+verify), onnx_run (compile+run on random
# inputs), npy (the .npy reader), image (ImageDecoder: JPEG, PNG, TIFF, BMP, PNM, WebP,
# JPEG 2000), artifact_load (the .smelt loader, and a run of what loads). The ONNX targets mutate models with smelt-fuzz's structure-aware mutator.
#
#   scripts/fuzz.sh smoke                 # CI: build, then each target for SMOKE_RUNS (4000) inputs, seed 1
#   scripts/fuzz.sh run TARGET SECONDS    # one target, corpus kept in $SMELT_CACHE/fuzz/corpus
#   scripts/fuzz.sh build | seeds         # the instrumented build; the seed corpora
#
# The one-hour run of a target is `scripts/fuzz.sh run TARGET 3600` (or in chunks, e.g.
# six `run TARGET 600`: the corpus carries over). Crashes land in target/fuzz-artifacts/.
# Seeds come from the test data (scripts/fetch-test-data.sh): the node test models, the
# images of the ImageDecoder cases, and .npy files written by the test venv's numpy.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SMELT_CACHE="${SMELT_CACHE:-$HOME/.cache/smelt}"
DATA="$SMELT_CACHE/data"
FUZZ="$SMELT_CACHE/fuzz"
# The instrumented build lives in the cache, so CI's fresh clones rebuild incrementally.
FUZZ_TARGET_DIR="${FUZZ_TARGET_DIR:-$FUZZ/target}"
TARGETS=(onnx_import onnx_run npy image artifact_load)
HOST="$(rustc -vV | sed -n 's/^host: //p')"
ARTIFACTS="$ROOT/target/fuzz-artifacts"

build() {
  # --target keeps the instrumentation off build scripts and proc macros.
  RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing" \
    cargo build --release --locked --manifest-path fuzz/Cargo.toml \
    --target "$HOST" --target-dir "$FUZZ_TARGET_DIR"
}

seeds() {
  local s="$FUZZ/seeds"
  rm -rf "$s"
  mkdir -p "$s"/{onnx,npy,image,artifact}
  # Artifacts of the example model (fuzz/seeds/artifact: a whole file, and its manifest
  # and weights for the target to wrap in a well-checksummed header).
  cp "$ROOT"/fuzz/seeds/artifact/* "$s/artifact/"
  # Node test models up to 64 KB (the larger ones are weights, not structure).
  find "$DATA/node" -name model.onnx -size -64k | while read -r m; do
    cp "$m" "$s/onnx/$(basename "$(dirname "$m")").onnx"
  done
  cp examples/mlp/model.onnx "$s/onnx/mlp.onnx"
  "$SMELT_CACHE/venv/bin/python" - "$DATA/node" "$s" <<'EOF'
import glob, os, sys
import numpy as np
import onnx
from onnx import numpy_helper
node, out = sys.argv[1], sys.argv[2]
for p in glob.glob(os.path.join(node, "test_image_decoder_*", "test_data_set_0", "input_0.pb")):
    t = onnx.TensorProto()
    with open(p, "rb") as f:
        t.ParseFromString(f.read())
    name = p.split(os.sep)[-3]
    with open(os.path.join(out, "image", name), "wb") as f:
        f.write(numpy_helper.to_array(t).tobytes())
rng = np.random.default_rng(0)
for i, (dt, shape) in enumerate([("<f4", (2, 3)), ("<f8", ()), ("<i8", (4,)), ("|u1", (1, 2, 3)),
                                 ("|b1", (3,)), ("<f2", (2, 2)), ("<c8", (2,)), ("<i4", (0, 5))]):
    np.save(os.path.join(out, "npy", f"seed{i}.npy"), (rng.random(shape) * 10).astype(dt))
EOF
}

corpus_of() {
  case "$1" in
    onnx_import|onnx_run) echo onnx ;;
    artifact_load) echo artifact ;;
    *) echo "$1" ;;
  esac
}

# run TARGET SECONDS [SEED] [CORPUS] [RUNS]: fuzz one target; new inputs go to CORPUS. With
# RUNS, it stops after that many inputs (the same ones for a given seed and binary: the
# smoke is deterministic, so what passes here passes in CI); SECONDS then only caps it.
run() {
  local t="$1" secs="$2" seed="${3:-0}" corpus="${4:-$FUZZ/corpus/$1}" runs="${5:--1}"
  mkdir -p "$corpus" "$ARTIFACTS"
  # A finding is this run's: earlier artifacts of the target are cleared.
  rm -f "$ARTIFACTS/$t-"*
  local max_len=262144
  [[ "$t" == npy ]] && max_len=4096
  # Past findings (fuzz/regressions) are replayed first, with the seeds.
  "$FUZZ_TARGET_DIR/$HOST/release/$t" "$corpus" "$FUZZ/seeds/$(corpus_of "$t")" \
    "$ROOT/fuzz/regressions/$(corpus_of "$t")" \
    -max_total_time="$secs" -runs="$runs" -seed="$seed" -timeout=20 -rss_limit_mb=2048 \
    -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$ARTIFACTS/$t-" 2>&1 \
    | grep -E "^(#[0-9]+ +(DONE|INITED)|stat::number_of_executed_units|==[0-9]+==|SUMMARY|.*panicked|artifact_prefix|Test unit written|.*deadly signal)" || true
  # libFuzzer exits non-zero on a finding, and leaves the input as an artifact.
  if compgen -G "$ARTIFACTS/$t-*" >/dev/null; then
    echo "fuzz: $t found a crash:" "$ARTIFACTS/$t-"* >&2
    return 1
  fi
}

case "${1:-smoke}" in
  build) build ;;
  seeds) seeds ;;
  run) build; [[ -d "$FUZZ/seeds/onnx" ]] || seeds; run "$2" "$3" "${4:-0}" ;;
  smoke)
    start=$SECONDS
    build
    seeds
    runs="${SMOKE_RUNS:-4000}"
    status=0
    for t in "${TARGETS[@]}"; do
      # A fresh corpus each time: the run is bounded by its input count and the same for
      # a given seed (the 120 s cap only guards against a slow machine).
      tmp="$(mktemp -d)"
      # One kernel table on every machine (all x86-64 CI machines have AVX2), so the
      # coverage that steers the inputs does not depend on the CPU.
      SMELT_ISA=avx2 run "$t" 120 1 "$tmp" "$runs" || status=1
      rm -rf "$tmp"
    done
    echo "fuzz smoke: ${#TARGETS[@]} targets x ${runs} inputs, $((SECONDS - start)) s with the build"
    if [[ $status -eq 0 ]]; then
      echo "fuzz: ${#TARGETS[@]} passed, 0 failed"
    fi
    exit $status
    ;;
  *) echo "usage: scripts/fuzz.sh [smoke | build | seeds | run TARGET SECONDS [SEED]]" >&2; exit 2 ;;
esac
