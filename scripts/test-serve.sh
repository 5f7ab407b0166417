#!/usr/bin/env bash
# `smelt serve` against the real tritonclient (HTTP and gRPC) from PyPI: metadata, infer
# (binary and JSON, bit-equal to `smelt run`), errors, overload (503s) and a MiniLM batching
# check (when scripts/fetch-test-data.sh has fetched it). scripts/test.sh runs it after
# building; SMELT_SKIP_SERVE=1 skips it there.
#
#   scripts/test-serve.sh            # needs target/release/smelt (cargo build --release)
#
# The venv ($SMELT_CACHE/serve-venv, pinned with hashes by tests/serve/requirements.txt) is
# its own: tritonclient pins protobuf and grpcio versions the other venvs do not have. It
# is made when missing (about 30 s); the tests take about 10 s.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SMELT_CACHE="${SMELT_CACHE:-$HOME/.cache/smelt}"
export SMELT_CACHE
PYTHON="${SMELT_PYTHON:-python3}"
VENV="$SMELT_CACHE/serve-venv"
REQS="$ROOT/tests/serve/requirements.txt"
STAMPS="$SMELT_CACHE/stamps"
export SMELT="${SMELT:-$ROOT/target/release/smelt}"
mkdir -p "$STAMPS"

log() { printf '[test-serve] %s\n' "$*" >&2; }

[[ -x "$SMELT" ]] || { log "no smelt binary at $SMELT: run cargo build --release first"; exit 1; }

PY_VER="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
KEY="py${PY_VER}-$(sha256sum "$REQS" | cut -c1-16)"
if [[ -f "$STAMPS/serve-venv-$KEY" && -x "$VENV/bin/python" ]]; then
  log "venv up to date ($VENV)"
else
  [[ "$PY_VER" == "3.11" ]] || log "warning: Python $PY_VER; the pinned wheel hashes are for CPython 3.11"
  log "creating $VENV (tritonclient[http,grpc], pytest)"
  rm -f "$STAMPS"/serve-venv-*
  "$PYTHON" -m venv --clear "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --require-hashes --only-binary=:all: -r "$REQS"
  touch "$STAMPS/serve-venv-$KEY"
fi

log "tritonclient tests against $SMELT"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/serve
