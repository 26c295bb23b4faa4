#!/usr/bin/env bash
# Memory under a flood of large AdmissionReviews: the release
# webhook, started fresh for every run, against bench/src/bin/flood.rs. See
# BENCHMARKS.md, "Memory under a flood".
#
#   bench/flood.sh                      the scenarios against the current tree
#   BEFORE_REV=main bench/flood.sh      the same against that revision first, then the current tree
#
# Scenarios (each run on a freshly started server, so VmHWM is that run's peak):
#   h1: 48 HTTP/1.1 connections, one 7.5 MiB body each
#   h2: 8 HTTP/2 connections x 32 concurrent streams, one 4 MiB body each
#   mix: MIX_CONNECTIONS (900) HTTP/1.1 connections each holding 15,000 bytes of
#        an unfinished request head (about the most a connection buffers), then h2
# Every body is fixture 07 grown (bench/bench.py grow) and padded to size, sent
# over SPREAD; a small request (fixture 01, compact as a kube-apiserver sends
# it) goes every 100 ms on a kept-alive connection of its own meanwhile.
#
# Knobs: ROUNDS=2 SPREAD=2s TIMEOUT=5s (the ?timeout= sent; the manifests' 5s)
#   SCENARIOS="h1 h2" (add mix for the worst case) MIX_CONNECTIONS=900 H1=48 H2=8x32 H1_BYTES=7864320 H2_BYTES=4194304
#   SERVER_ARGS="" (extra flags for the current tree's server only)
#   BEFORE_REV= (a git revision to measure first) PORT=18543 ADMIN_PORT=18180
#   MAX_LOAD=1.5 MAX_WAIT=600 OUT=target/bench-results/<time>-flood
set -euo pipefail
cd "$(dirname "$0")/.."

: "${ROUNDS:=2}" "${SPREAD:=2s}" "${TIMEOUT:=5s}" "${SCENARIOS:=h1 h2}"
: "${H1:=48}" "${H2:=8x32}" "${H1_BYTES:=7864320}" "${H2_BYTES:=4194304}"
: "${SERVER_ARGS:=}" "${BEFORE_REV:=}" "${PORT:=18543}" "${ADMIN_PORT:=18180}"
: "${MAX_LOAD:=1.5}" "${MAX_WAIT:=600}" "${MIX_CONNECTIONS:=900}"
: "${OUT:=target/bench-results/$(date +%Y%m%d-%H%M%S)-flood}"

log() { printf '[flood.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# shellcheck source=bench/common.sh
. bench/common.sh

mkdir -p "$OUT" target/flood
OUT=$(cd "$OUT" && pwd)
SERVER_PID=
cleanup() {
    if [ -n "$SERVER_PID" ]; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT

declare -A BIN=()
NAMES=()
if [ -n "$BEFORE_REV" ]; then
    rev=$(git rev-parse --short "$BEFORE_REV")
    src=$(mktemp -d)
    log "building $rev (before) from git archive in $src"
    git archive "$rev" | tar -x -C "$src"
    CARGO_TARGET_DIR=$PWD/target cargo build --release --locked \
        --manifest-path "$src/Cargo.toml" --bin pipelinerollout-webhook
    cp target/release/pipelinerollout-webhook "target/flood/webhook-$rev"
    rm -rf "$src"
    BIN[before]=target/flood/webhook-$rev
    NAMES+=(before)
fi
log "building the current tree's webhook and bench/src/bin/flood.rs"
cargo build --release --locked --bin pipelinerollout-webhook
cargo build --release --locked -p bench --bin flood
cp target/release/pipelinerollout-webhook target/flood/webhook-current
BIN[after]=target/flood/webhook-current
NAMES+=(after)
FLOOD=target/release/flood

FIXTURE=tests/fixtures/admission/07-allow-data-loss-true-kubectl-annotate-alice-validate.json
# An UPDATE carries the object twice: grow each to a bit under half the size
# (the padding makes up the rest).
python3 bench/bench.py grow "$FIXTURE" $((H1_BYTES * 47 / 100)) "$OUT/h1-body.json" >&2
python3 bench/bench.py grow "$FIXTURE" $((H2_BYTES * 47 / 100)) "$OUT/h2-body.json" >&2
python3 bench/bench.py compact tests/fixtures/admission/01-create-kubectl-apply-validate.json \
    "$OUT/probe.json" >&2
CERTS="$OUT/certs"

start_server() { # name
    local extra=()
    if [ "$1" = after ] && [ -n "$SERVER_ARGS" ]; then
        read -r -a extra <<<"$SERVER_ARGS"
    fi
    LOG_LEVEL=warn "${BIN[$1]}" --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$ADMIN_PORT" \
        --dev-certs-dir "$CERTS" --shutdown-delay 0s --shutdown-grace 1s "${extra[@]}" \
        2>>"$OUT/server-$1.log" &
    SERVER_PID=$!
    local i
    for i in $(seq 1 200); do
        if curl -fsS "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null 2>&1; then
            sleep 0.5
            return 0
        fi
        sleep 0.05
    done
    log "server $1 never ready"
    exit 1
}

# Opens N TLS connections that each send 15,000 bytes of a request head and
# holds them for HOLD seconds (the server's header timeout is 10 s); creates
# READY once they are open.
hold_heads() { # n hold ready
    python3 - "$CERTS/ca.crt" "$PORT" "$@" <<'EOF'
import asyncio, ssl, sys
ca, port, n, hold, ready = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
async def main():
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["http/1.1"])
    head = b"POST /validate HTTP/1.1\r\nhost: localhost\r\nx-pad: " + b"a" * 15000
    conns = []
    for _ in range(n):
        r, w = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
        w.write(head)
        await w.drain()
        conns.append(w)
    open(ready, "w").close()
    await asyncio.sleep(hold)
    for w in conns:
        w.close()
asyncio.run(main())
EOF
}

stop_server() {
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=
}

python3 - "$OUT/meta.json" <<EOF
import json, subprocess, sys
cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
json.dump({"nproc": $(nproc), "cpu": cpu, "loadavg_before": "$(cut -d' ' -f1-3 /proc/loadavg)",
           "git": "$(git rev-parse --short HEAD)", "before_rev": "$BEFORE_REV", "spread": "$SPREAD",
           "timeout": "$TIMEOUT", "server_args": "$SERVER_ARGS"}, open(sys.argv[1], "w"))
EOF

for round in $(seq 1 "$ROUNDS"); do
    for scenario in $SCENARIOS; do
        for name in "${NAMES[@]}"; do
            wait_for_quiet 30
            start_server "$name"
            HOLDER=
            case "$scenario" in
            h1) load=(--http1 "$H1" --body "$OUT/h1-body.json" --pad-to "$H1_BYTES") ;;
            h2) load=(--http2 "$H2" --body "$OUT/h2-body.json" --pad-to "$H2_BYTES") ;;
            mix)
                load=(--http2 "$H2" --body "$OUT/h2-body.json" --pad-to "$H2_BYTES")
                rm -f "$OUT/heads.ready"
                hold_heads "$MIX_CONNECTIONS" 9 "$OUT/heads.ready" &
                HOLDER=$!
                while [ ! -e "$OUT/heads.ready" ]; do sleep 0.1; done
                log "$MIX_CONNECTIONS connections hold partial heads; server VmRSS $(awk '/^VmRSS/ { print $2 }' "/proc/$SERVER_PID/status") kB"
                ;;
            *)
                log "unknown scenario $scenario"
                exit 2
                ;;
            esac
            load_before=$(cut -d' ' -f1 /proc/loadavg)
            log "round $round: $scenario against $name (pid $SERVER_PID, load $load_before)"
            "$FLOOD" --addr "127.0.0.1:$PORT" --ca "$CERTS/ca.crt" --spread "$SPREAD" \
                --timeout "$TIMEOUT" --pid "$SERVER_PID" --probe "$OUT/probe.json" "${load[@]}" >"$OUT/run.json"
            if [ -n "$HOLDER" ]; then wait "$HOLDER" || true; fi
            metrics=$(curl -fsS "http://127.0.0.1:$ADMIN_PORT/metrics" | grep -E '^pipelinerollout_webhook_(limit_refusals|body_budget_waits)_total' | tr '\n' ';' || true)
            python3 - "$OUT/run.json" "$round" "$scenario" "$name" "$metrics" "$load_before" >>"$OUT/runs.jsonl" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))
run.update(round=int(sys.argv[2]), scenario=sys.argv[3], server=sys.argv[4], metrics=sys.argv[5],
           loadavg=float(sys.argv[6]))
print(json.dumps(run))
EOF
            stop_server
            sleep 1
        done
    done
done

python3 - "$OUT/runs.jsonl" <<'EOF' | tee "$OUT/report.md"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
print("| scenario | server | round | load | VmHWM MiB | sampled RSS peak MiB | 200 | 503 | other | failed | took s | probes | probe p50 / p99 / max ms | probe failures |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
for r in runs:
    p = r["probe_ms"]
    fmt = lambda v: "-" if v is None else f"{v:.1f}"
    print(f"| {r['scenario']} {r['connections']}x{r['streams_per_connection']} x {r['body_bytes'] / 1048576:.1f} MiB "
          f"| {r['server']} | {r['round']} | {r['loadavg']:.1f} | {r['server_vmhwm_kib'] / 1024:.0f} | {r['server_vmrss_kib_sampled_peak'] / 1024:.0f} "
          f"| {r['answered_200']} | {r['unavailable_503']} | {r['other_status']} | {r['failed']} | {r['took_s']:.1f} "
          f"| {r['probes']} | {fmt(p['p50'])} / {fmt(p['p99'])} / {fmt(p['max'])} | {len(r['probe_failures'])} |")
for r in runs:
    if r["examples"] or r["probe_failures"]:
        print(f"\n{r['scenario']} {r['server']} round {r['round']}: {r['examples'][:3]} {r['probe_failures'][:3]}")
EOF
log "results in $OUT"
