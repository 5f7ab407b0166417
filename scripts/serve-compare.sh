#!/usr/bin/env bash
# Serving throughput side by side (issue 13): MiniLM-L3 at sequence 16 under closed-loop
# clients from `smelt bench --server`, served in turn by
#   - `smelt serve` at batch 1 (2 instances x 1 thread, 1 instance x 2 threads),
#   - `smelt serve` with dynamic batching (to 6, 8 or 16 on 2 instances, to 8 or 16 on 1:
#     with 16 closed-loop clients, a batch of 8 on one 2-thread instance keeps the next 8
#     requests queued while it runs, where two instances of 8 each wait for their clients'
#     next requests between batches),
#   - Triton Inference Server's own dynamic batcher hosting onnxruntime, with the same two
#     splits (scripts/pytriton_host.py: the nvidia-pytriton wheel's tritonserver, whose
#     Python backend runs one onnxruntime session per instance),
# then smelt's offline throughput (`smelt bench --scenario offline --batch B`) at batch 6,
# 8 and 16, to set beside the batches the servers formed. Outside CI: about 6 minutes, plus
# a minute to make the Triton venv the first time. Prints a Markdown table; the JSON of
# each load is kept in $OUT.
#
#   scripts/serve-compare.sh                 # needs target/release/smelt and the test data
#   DURATION=20 CLIENTS=32 scripts/serve-compare.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SMELT_CACHE="${SMELT_CACHE:-$HOME/.cache/smelt}"
SMELT="${SMELT:-$ROOT/target/release/smelt}"
MODEL="${MODEL:-$SMELT_CACHE/data/models/minilm-b1/model.onnx}"
DURATION="${DURATION:-10}"
CLIENTS="${CLIENTS:-16}"
SEQ="${SEQ:-16}"
OUT="${OUT:-$ROOT/target/serve-compare}"
PORT="${PORT:-18100}"
# Triton's venv: the wheel's tritonserver and the onnxruntime the bench baselines use.
VENV="$SMELT_CACHE/triton-venv"
PYTRITON="nvidia-pytriton==0.7.0"
ORT="onnxruntime==1.31.1"
PYTHON="${SMELT_PYTHON:-python3}"

log() { printf '[serve-compare] %s\n' "$*" >&2; }
[[ -x "$SMELT" ]] || { log "no smelt binary at $SMELT: run cargo build --release first"; exit 1; }
[[ -f "$MODEL" ]] || { log "no model at $MODEL: run scripts/fetch-test-data.sh first"; exit 1; }
mkdir -p "$OUT" "$SMELT_CACHE/stamps"
STAMP="$SMELT_CACHE/stamps/triton-venv-$(echo "$PYTRITON $ORT" | sha256sum | cut -c1-16)"
if [[ ! -f "$STAMP" || ! -x "$VENV/bin/python" ]]; then
  log "making $VENV ($PYTRITON, $ORT)"
  "$PYTHON" -m venv --clear "$VENV"
  "$VENV/bin/pip" install -q "$PYTRITON" "$ORT" "numpy<2"
  touch "$STAMP"
fi
# The wheel's Python-backend stub links the system libpython; it must load the one the
# venv's interpreter (and its standard library) belong to.
LIBDIR="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')"

SERVER_PID=""
stop_server() {
  if [[ -n "$SERVER_PID" ]]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
  # pytriton leaves its tritonserver to its own shutdown; make sure no server holds the ports.
  pkill -f "tritonserver.*--http-port=$PORT" 2>/dev/null || true
}
trap stop_server EXIT

wait_ready() {
  for _ in $(seq 1 120); do
    if [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v2/models/minilm/ready")" == 200 ]]; then
      return 0
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || { log "the server exited"; return 1; }
    sleep 0.5
  done
  log "the server was not ready in 60 s"
  return 1
}

# load LABEL: the closed-loop load against the server now running.
load() {
  "$SMELT" bench "$MODEL" --shape "input_ids=1x$SEQ" --shape "attention_mask=1x$SEQ" \
    --server "http://127.0.0.1:$PORT" --server-model minilm \
    --metrics-url "http://127.0.0.1:$((PORT + 2))" --concurrency "$CLIENTS" \
    --duration "$DURATION" --json "$OUT/$1.json" >"$OUT/$1.txt" 2>&1
}

# smelt LABEL ARGS...: `smelt serve` with ARGS, loaded.
smelt_case() {
  local label="$1"
  shift
  log "$label"
  "$SMELT" serve --model "minilm=$MODEL" --host 127.0.0.1 --http-port "$PORT" \
    --grpc-port "$((PORT + 1))" --metrics-port "$((PORT + 2))" "$@" >"$OUT/$label.server.log" 2>&1 &
  SERVER_PID=$!
  wait_ready
  load "$label"
  stop_server
}

# triton LABEL INSTANCES THREADS MAX_BATCH: Triton's batcher over onnxruntime, loaded.
triton_case() {
  local label="$1"
  log "$label"
  LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$VENV/bin/python" \
    "$ROOT/scripts/pytriton_host.py" "$MODEL" --name minilm --instances "$2" --threads "$3" \
    --max-batch-size "$4" --max-queue-delay-us 2000 --http-port "$PORT" \
    --grpc-port "$((PORT + 1))" --metrics-port "$((PORT + 2))" >"$OUT/$label.server.log" 2>&1 &
  SERVER_PID=$!
  wait_ready
  load "$label"
  stop_server
}

smelt_case smelt-b1-2x1 --max-batch-size 0 --instances 2 --threads 2
smelt_case smelt-b1-1x2 --max-batch-size 0 --instances 1 --threads 2
smelt_case smelt-b8-2x1 --max-batch-size 8 --instances 2 --threads 2 --max-queue-delay-us 2000
smelt_case smelt-b8-1x2 --max-batch-size 8 --instances 1 --threads 2 --max-queue-delay-us 2000
smelt_case smelt-b6-2x1 --max-batch-size 6 --instances 2 --threads 2 --max-queue-delay-us 2000
smelt_case smelt-b16-2x1 --max-batch-size 16 --instances 2 --threads 2 --max-queue-delay-us 2000
smelt_case smelt-b16-1x2 --max-batch-size 16 --instances 1 --threads 2 --max-queue-delay-us 2000
triton_case triton-ort-b8-2x1 2 1 8
triton_case triton-ort-b8-1x2 1 2 8
triton_case triton-ort-b16-1x2 1 2 16
for b in 6 8 16; do
  log "offline batch $b"
  "$SMELT" bench "$MODEL" --shape "input_ids=1x$SEQ" --shape "attention_mask=1x$SEQ" \
    --scenario offline --batch "$b" --threads 2 --duration "$DURATION" \
    --json "$OUT/offline-b$b.json" >"$OUT/offline-b$b.txt" 2>&1
done

"$PYTHON" - "$OUT" "$CLIENTS" "$SEQ" <<'EOF'
import json, os, sys
out, clients, seq = sys.argv[1], sys.argv[2], sys.argv[3]
print(f"MiniLM-L3, sequence {seq}, {clients} closed-loop clients (`smelt bench --server`)\n")
print("| server | requests/s | p50 ms | p99 ms | mean batch | batches by size | errors |")
print("|---|---|---|---|---|---|---|")

def histogram(cum):
    """The server's cumulative batch-size buckets as counts per range: '5-8: 1797'."""
    parts, prev_le, prev_n = [], 0, 0.0
    for le, n in cum:
        if n > prev_n:
            hi = "inf" if le == "+Inf" else str(int(float(le)))
            parts.append(f"{prev_le + 1}-{hi}: {int(n - prev_n)}")
        if le != "+Inf":
            prev_le = int(float(le))
        prev_n = n
    return ", ".join(parts)

for label in ["smelt-b1-2x1", "smelt-b1-1x2", "smelt-b8-2x1", "smelt-b8-1x2", "smelt-b6-2x1",
              "smelt-b16-2x1", "smelt-b16-1x2", "triton-ort-b8-2x1", "triton-ort-b8-1x2",
              "triton-ort-b16-1x2"]:
    p = os.path.join(out, label + ".json")
    if not os.path.exists(p):
        print(f"| {label} | (no result) | | | | |")
        continue
    r = json.load(open(p))
    metrics = r.get("server_metrics") or {}
    mean = metrics.get("mean_batch", float("nan"))
    hist = histogram(metrics.get("batch_size_cumulative", []))
    lat = r["latency_ms"]
    print(f"| {label} | {r['requests_per_s']:.1f} | {lat['p50']:.1f} | {lat['p99']:.1f} | "
          f"{mean:.2f} | {hist} | {sum(r['errors'].values()) if r['errors'] else 0} |")
print()
for b in (6, 8, 16):
    p = os.path.join(out, f"offline-b{b}.json")
    if os.path.exists(p):
        r = json.load(open(p))
        print(f"smelt offline, batch {b}, 2 threads: {r['smelt']['throughput_per_s']:.1f} samples/s")
EOF
