#!/usr/bin/env bash
# The Python package's tests (python/): builds the abi3 wheel with maturin into the
# workspace's target directory (reusing the smelt crates the workspace build compiled:
# python/ is a workspace member, so only pyo3, numpy and the module itself are compiled),
# installs it into a cached venv that holds torch, and runs pytest (python/tests) against
# onnxruntime and eager PyTorch. scripts/test.sh runs it last.
#
#   scripts/test-python.sh
#   SMELT_SKIP_LINT=1 scripts/test-python.sh     # skip fmt/clippy of the native module
#                                                # (scripts/test.sh lints it with the workspace)
#
# The venv ($SMELT_CACHE/py-venv, pinned by python/requirements-test.txt with hashes) is made
# when missing: torch from PyPI pulls in its CUDA libraries (about 5 GB installed, a minute
# or two); it runs on a CPU-only machine. Needs Python 3.11 (the pins are cp311 wheels) and
# the test data of scripts/fetch-test-data.sh for the public-model tests.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SMELT_CACHE="${SMELT_CACHE:-$HOME/.cache/smelt}"
export SMELT_CACHE
PYTHON="${SMELT_PYTHON:-python3}"
VENV="$SMELT_CACHE/py-venv"
REQS="$ROOT/python/requirements-test.txt"
STAMPS="$SMELT_CACHE/stamps"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
mkdir -p "$STAMPS"

log() { printf '[test-python] %s\n' "$*" >&2; }

# ---------------------------------------------------------------- the venv
PY_VER="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
KEY="py${PY_VER}-$(sha256sum "$REQS" | cut -c1-16)"
if [[ -f "$STAMPS/py-venv-$KEY" && -x "$VENV/bin/python" ]]; then
  log "venv up to date ($VENV)"
else
  [[ "$PY_VER" == "3.11" ]] || log "warning: Python $PY_VER; the pinned wheel hashes are for CPython 3.11"
  log "creating $VENV (torch and its CUDA libraries: a few GB, a minute or two)"
  rm -f "$STAMPS"/py-venv-*
  "$PYTHON" -m venv --clear "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --require-hashes --only-binary=:all: -r "$REQS"
  touch "$STAMPS/py-venv-$KEY"
fi

# ---------------------------------------------------------------- lint
if [[ -z "${SMELT_SKIP_LINT:-}" ]]; then
  log "fmt and clippy (smelt-python)"
  cargo fmt -p smelt-python -- --check
  cargo clippy --release --locked -p smelt-python -- -D warnings
fi

# ---------------------------------------------------------------- the wheel
log "building the wheel"
BUILD_LOG="$TARGET/maturin-build.log"
mkdir -p "$TARGET/wheels"
rm -f "$TARGET"/wheels/smelt-*.whl
"$VENV/bin/maturin" build --release --locked -m python/Cargo.toml -o "$TARGET/wheels" 2>&1 | tee "$BUILD_LOG"
if grep -qE 'Compiling smelt-(ir|onnx|passes|cpu|kernels|reference|runtime|bench) ' "$BUILD_LOG"; then
  log "note: the wheel build compiled smelt crates again: their features differ from the"
  log "      workspace build's (see the syn entry in crates/smelt-cli/Cargo.toml)"
fi
WHEEL="$(ls "$TARGET"/wheels/smelt-*.whl | head -n1)"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$WHEEL"

# ---------------------------------------------------------------- pytest
# The artifact tests write .smelt files with the command line (a no-op after scripts/test.sh).
log "the command line, for the artifact tests"
cargo build --release --locked -p smelt-cli
export SMELT_CLI="${SMELT_CLI:-$TARGET/release/smelt}"
log "pytest"
# From the repository root with the pytest script (not `python -m`), so that python/smelt
# (the sources, without the native module) does not shadow the installed package.
"$VENV/bin/pytest" -q -p no:cacheprovider python/tests
