#!/usr/bin/env bash
# Soak of `smelt serve` (issue 13), MiniLM-L3 at sequence 16 with dynamic batching:
#   1. the saturating rate: closed-loop clients for 10 s (requests/s answered);
#   2. the soak: Poisson arrivals at twice that rate for SOAK_SECONDS (600) on 128
#      connections, every answer checked against a local run (`--check-answers`); overload
#      must be answered by 503s, nothing lost or wrong, the server's RSS (sampled every
#      5 s) flat within 10% from the first minute to the last;
#   3. compiling while serving: 30 s at half the saturating rate, then 30 s more while
#      requests at new sequence lengths (each a shape the server has not compiled) arrive
#      one after another; the p99 of the cached-shape requests in both windows.
# Outside CI: about 12 minutes. Prints a summary; logs and JSON stay in $OUT.
#
#   scripts/soak.sh                          # needs target/release/smelt and the test data
#   SOAK_SECONDS=60 scripts/soak.sh          # a short try
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SMELT_CACHE="${SMELT_CACHE:-$HOME/.cache/smelt}"
SMELT="${SMELT:-$ROOT/target/release/smelt}"
MODEL="${MODEL:-$SMELT_CACHE/data/models/minilm-b1/model.onnx}"
SOAK_SECONDS="${SOAK_SECONDS:-600}"
OUT="${OUT:-$ROOT/target/soak}"
PORT="${PORT:-18200}"
PYTHON="${SMELT_PYTHON:-python3}"
SHAPES=(--shape input_ids=1x16 --shape attention_mask=1x16)

log() { printf '[soak] %s %s\n' "$(date +%T)" "$*" >&2; }
[[ -x "$SMELT" ]] || { log "no smelt binary at $SMELT: run cargo build --release first"; exit 1; }
[[ -f "$MODEL" ]] || { log "no model at $MODEL: run scripts/fetch-test-data.sh first"; exit 1; }
mkdir -p "$OUT"

"$SMELT" serve --model "minilm=$MODEL" --host 127.0.0.1 --http-port "$PORT" \
  --grpc-port "$((PORT + 1))" --metrics-port "$((PORT + 2))" --max-batch-size 8 \
  --instances 2 --threads 2 --max-queue-delay-us 2000 --max-queue-size 32 \
  >"$OUT/server.log" 2>&1 &
SERVER=$!
SAMPLER=""
cleanup() {
  [[ -n "$SAMPLER" ]] && kill "$SAMPLER" 2>/dev/null || true
  kill -TERM "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 1 120); do
  [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v2/health/ready")" == 200 ]] && break
  kill -0 "$SERVER" 2>/dev/null || { log "the server exited"; exit 1; }
  sleep 0.5
done

# bench NAME ARGS...: a load against the server, JSON to $OUT/NAME.json.
bench() {
  local name="$1"
  shift
  "$SMELT" bench "$MODEL" "${SHAPES[@]}" --server "http://127.0.0.1:$PORT" --server-model minilm \
    --metrics-url "http://127.0.0.1:$((PORT + 2))" --json "$OUT/$name.json" "$@" \
    >"$OUT/$name.txt" 2>&1
}
field() { "$PYTHON" -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

log "1. saturating rate (16 closed-loop clients, 10 s)"
bench saturate --concurrency 16 --duration 10
SAT="$(field "$OUT/saturate.json" 'r["requests_per_s"]')"
RATE="$("$PYTHON" -c "print(round(2 * $SAT, 1))")"
HALF="$("$PYTHON" -c "print(round(0.5 * $SAT, 1))")"
log "saturates at $SAT requests/s; soak at $RATE for $SOAK_SECONDS s"

# The server's RSS every 5 s, KiB.
(while kill -0 "$SERVER" 2>/dev/null; do
  echo "$(date +%s) $(awk '/^VmRSS/ {print $2}' "/proc/$SERVER/status")"
  sleep 5
done) >"$OUT/rss.txt" &
SAMPLER=$!
bench soak --concurrency 128 --qps "$RATE" --duration "$SOAK_SECONDS" --check-answers
kill "$SAMPLER" 2>/dev/null || true
SAMPLER=""

log "3. compiling while serving (Poisson at $HALF requests/s, 30 s without, 30 s with)"
bench cached --concurrency 16 --qps "$HALF" --duration 30 --check-answers
# Requests at new sequence lengths, one after another, while the second window runs.
"$PYTHON" - "$PORT" >"$OUT/new-shapes.txt" 2>&1 <<'EOF' &
import json, sys, time, urllib.request
port = int(sys.argv[1])
time.sleep(3)  # past the load's 2 s warm-up
for seq in range(17, 47):
    body = json.dumps({"inputs": [
        {"name": n, "shape": [1, seq], "datatype": "INT64", "data": [1] * seq}
        for n in ("input_ids", "attention_mask")]}).encode()
    t = time.perf_counter()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/minilm/infer", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        r.read()
    print(f"sequence {seq}: {1e3 * (time.perf_counter() - t):.0f} ms (compile included)")
    time.sleep(0.5)
EOF
NEW=$!
bench compiling --concurrency 16 --qps "$HALF" --duration 30 --check-answers
wait "$NEW" || log "the new-shape requests failed (see $OUT/new-shapes.txt)"

"$PYTHON" - "$OUT" "$SAT" "$RATE" <<'EOF'
import json, os, sys
out, sat, rate = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
def load(n):
    return json.load(open(os.path.join(out, n + ".json")))
s = load("soak")
rss = [(int(t), int(k)) for t, k in (l.split() for l in open(os.path.join(out, "rss.txt")) if len(l.split()) == 2)]
t0 = rss[0][0]
first = [k for t, k in rss if t - t0 <= 60]
last = [k for t, k in rss if t >= rss[-1][0] - 60]
mean = lambda v: sum(v) / len(v)
print(f"saturating rate: {sat:.1f} requests/s (16 closed-loop clients)")
print(f"soak: {s['seconds']:.0f} s of Poisson arrivals at {rate:.1f} requests/s on 128 connections")
print(f"  answered 200: {s['ok']} ({s['requests_per_s']:.1f}/s); wrong: {s['wrong']}; "
      f"not bit-equal: {s['inexact']}; other answers by status: {s['errors']}")
print(f"  latency ms (answered): p50 {s['latency_ms']['p50']:.1f} p99 {s['latency_ms']['p99']:.1f} max {s['latency_ms']['max']:.1f}")
print(f"  server RSS: first minute {mean(first)/1024:.1f} MiB, last minute {mean(last)/1024:.1f} MiB "
      f"({100 * (mean(last) / mean(first) - 1):+.1f}%), max {max(k for _, k in rss)/1024:.1f} MiB")
a, b = load("cached"), load("compiling")
print(f"compiling while serving, Poisson at {rate / 4:.1f} requests/s: p99 {a['latency_ms']['p99']:.1f} ms without, "
      f"{b['latency_ms']['p99']:.1f} ms with new shapes compiling ({b['latency_ms']['p99'] / a['latency_ms']['p99']:.2f}x); "
      f"wrong {a['wrong']} + {b['wrong']}, errors {a['errors']} {b['errors']}")
print(open(os.path.join(out, "new-shapes.txt")).read().strip())
EOF
