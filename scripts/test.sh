#!/usr/bin/env bash
# The whole test suite: fetch the test data (cached), build, unit and CLI tests,
# then the conformance suites against their expected-failures lists.
#
#   scripts/test.sh              # everything
#   SMELT_SKIP_LINT=1 scripts/test.sh   # skip fmt/clippy
#   SMELT_SKIP_PYTHON=1 scripts/test.sh # skip the Python package (scripts/test-python.sh)
#   SMELT_SKIP_SERVE=1 scripts/test.sh  # skip smelt serve against tritonclient (scripts/test-serve.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SMELT_CACHE="${SMELT_CACHE:-$HOME/.cache/smelt}"
export SMELT_CACHE
# Error paths should stay cheap: no backtrace capture in tests.
export RUST_BACKTRACE=0

step() { printf '\n=== %s\n' "$*"; }

step "test data"
scripts/fetch-test-data.sh
DATA="$SMELT_CACHE/data"

step "build (release)"
cargo build --release --workspace --locked
SMELT="$ROOT/target/release/smelt"

if [[ -z "${SMELT_SKIP_LINT:-}" ]]; then
  step "fmt and clippy"
  cargo fmt --all -- --check
  cargo clippy --release --workspace --all-targets --locked -- -D warnings
fi

step "unit and CLI tests"
cargo test --release --workspace --locked
# On a CPU with AVX-VNNI the AVX2 table's integer products take it: run the end-to-end
# integer tests once more on the plain AVX2 kernels (the kernel tests cover both).
SMELT_AVX_VNNI=0 cargo test --release -p smelt-runtime --locked --test quantized

step "example"
"$SMELT" run examples/mlp/model.onnx --input x=examples/mlp/x.npy

status=0
conf() {
  local name="$1"; shift
  step "conformance: $name"
  "$SMELT" conformance "$@" --expected-failures "tests/conformance/$name.xfail" --json "target/conformance-$name.json" || status=1
}
conf node "$DATA/node"
# The same suite on the reference executor alone (no passes): a differential check.
step "conformance: node at --opt-level 0"
"$SMELT" conformance "$DATA/node" --opt-level 0 --expected-failures tests/conformance/node.xfail || status=1
# The node cases whose graphs hold subgraphs (If, Loop, Scan, SequenceMap, FlexAttention,
# and functions expanded into them), every subgraph compiled as a plan: by default the
# suite's are too small to be compiled (crates/smelt-runtime/src/bodies.rs). Under a second.
step "conformance: node cases with subgraphs, all compiled"
SMELT_COMPILE_SUBGRAPHS_MIN=0 "$SMELT" conformance \
  "$DATA"/node/test_{affine_grid,flexattention,if,linear_attention,loop,range,scan,sequence_map}* || status=1
conf pytorch-converted "$DATA/onnx-wheel/pytorch-converted"
conf pytorch-operator "$DATA/onnx-wheel/pytorch-operator"
conf simple "$DATA/onnx-wheel/simple"
conf models "$DATA/models" --rtol 1e-3 --atol 1e-4 --timeout 300 --jobs 1
# Compiled artifacts of the real models: `compile --deterministic` fails unless the
# artifact's outputs at 1 and 2 threads, each run twice, are the same bits as the model
# compiled at load; `verify` then checks every checksum and the plan.
step "artifacts: bit-identical to compile at load"
art="$(mktemp -d)"
for spec in "resnet50" "minilm-b1 --shape input_ids=1x128 --shape attention_mask=1x128" \
    "yolov8n --shape images=1x3x320x320" "ppocr-det --shape x=1x3x640x640"; do
  read -r m shapes <<<"$spec"
  # shellcheck disable=SC2086 # the shapes are separate flags
  if "$SMELT" compile "$DATA/models/$m/model.onnx" $shapes --deterministic -o "$art/$m.smelt" \
      && "$SMELT" verify "$art/$m.smelt" >/dev/null; then
    echo "artifact $m: ok"
  else
    echo "artifact $m: FAILED" >&2
    status=1
  fi
  rm -f "$art/$m.smelt"
done
rm -rf "$art"
# The runtime-only build (smelt-run: the runtime without the `compiler` feature, so no
# ONNX importer and no pass) runs an artifact to the same output bytes as smelt, and
# refuses a .onnx model (unsupported, exit 5). About a minute cold.
step "runtime-only build (smelt-run)"
cargo build --release -p smelt-run --locked
if [[ -z "${SMELT_SKIP_LINT:-}" ]]; then
  cargo clippy --release -p smelt-run -p smelt-runtime --no-default-features --locked -- -D warnings
fi
rt="$(mktemp -d)"
if "$SMELT" compile examples/mlp/model.onnx --shape x=2x16 -o "$rt/mlp.smelt" >/dev/null \
    && "$SMELT" run "$rt/mlp.smelt" --input x=examples/mlp/x.npy --output-dir "$rt/a" >/dev/null \
    && target/release/smelt-run "$rt/mlp.smelt" --input x=examples/mlp/x.npy --output-dir "$rt/b" \
    && cmp "$rt/a/y.npy" "$rt/b/y.npy"; then
  code=0
  target/release/smelt-run examples/mlp/model.onnx --zeros 2>/dev/null || code=$?
  if [[ $code -eq 5 ]]; then echo "smelt-run: ok"; else echo "smelt-run: .onnx gave exit $code, not 5" >&2; status=1; fi
else
  echo "smelt-run: FAILED" >&2
  status=1
fi
rm -rf "$rt"
# scikit-learn models exported by skl2onnx (ZipMap maps, SVMs, trees, pipelines) against
# onnxruntime; labels exactly, scores within float32 rounding.
conf sklearn "$DATA/sklearn" --rtol 1e-5 --atol 1e-6
# LSTM layers, a voice-style model (an If picking Conv+LSTM stacks) and a detector with its
# NonMaxSuppression (planned in segments) against onnxruntime.
conf dynamic "$DATA/dynamic" --rtol 1e-4 --atol 1e-5

if [[ $status -ne 0 ]]; then
  echo "conformance: some suite did not match its expected-failures list" >&2
fi

# Hostile inputs: structure-aware mutants of the node test models, each run by the smelt
# binary under a 4 GB address-space limit and a 20 s limit; a panic, abort, internal error
# or hang fails (docs/fuzzing.md has the 20,000-mutant campaign).
step "mutant campaign"
target/release/smelt-mutants --smelt "$SMELT" --models "$DATA/node" --count 2000 --seed 1 \
  --vmem-kb 4000000 --timeout 20 --keep target/mutants || status=1

# A bounded, seeded libFuzzer run of each fuzz target (about 4 minutes with the build;
# SMELT_SKIP_FUZZ=1 skips it).
if [[ -z "${SMELT_SKIP_FUZZ:-}" ]]; then
  step "fuzz smoke"
  scripts/fuzz.sh smoke || status=1
fi

# smelt serve against the real tritonclient, HTTP and gRPC (a venv of its own, ~30 s cold).
if [[ -z "${SMELT_SKIP_SERVE:-}" ]]; then
  step "serve (tritonclient)"
  if ! SMELT="$SMELT" scripts/test-serve.sh; then
    echo "serve: the tritonclient tests failed" >&2
    status=1
  fi
fi

# The Python package: wheel (maturin), onnxruntime-compatibility and torch.compile tests.
if [[ -z "${SMELT_SKIP_PYTHON:-}" ]]; then
  step "python package"
  # The workspace steps above built and linted its native module.
  if ! SMELT_SKIP_LINT=1 scripts/test-python.sh; then
    echo "python: the Python package's tests failed" >&2
    status=1
  fi
fi
exit $status
