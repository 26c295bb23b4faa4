#!/usr/bin/env bash
# Load benchmark of the webhook against three reference servers
# (bench/src/bin/reference_server.rs): the bare tokio + hyper + rustls floor,
# and a constant and a parse-everything handler on the webhook's own
# TLS/HTTP stack. See BENCHMARKS.md.
#
#   bench/load.sh          full run: matrix (3 rounds x 10 s per cell), scale, start-to-ready
#   bench/load.sh smoke    the same, shortened: under a minute once built
#   bench/load.sh soak     10 minutes at concurrency 64 on /validate, RSS every 10 s
#
# Every knob is an environment variable (defaults for the full run):
#   ROUNDS=3 DURATION=10s CONCURRENCY="1 8 64" RATE=1000 (empty: no fixed-rate run) RATE_CONNECTIONS=8
#   ENDPOINTS="validate allowed mutate" SERVERS="webhook floor constant parse-all"
#     (validate: fixture 07, alice's denied force, on /validate; allowed: fixture
#     01, an allowed create, on /validate; mutate: fixture 07 on /mutate)
#     (SERVERS may also name webhook-quiet: the same binary with LOG_LEVEL=warn, so
#     without the per-request decision log line, to measure what that line costs)
#   PRETTY_LOADS="c1 c64" (/validate with the pretty-printed fixture; empty: none)
#   SCALE=1 SCALE_SIZES="64KiB:65536 1MiB:1048576" SCALE_DURATION=$DURATION
#   STARTS=10 SOAK_SECS=600 SOAK_CONCURRENCY=64 RSS_INTERVAL=10 SETTLE=1
#   RSS_SECS=20 (each server's resident memory after that long at c64 on
#     /validate, after the matrix; 0: no such run)
#   WARMUP=1 (seconds left out at the start of every run; 0 keeps whole runs)
#   LOG_LEVEL=info WEBHOOK_LOG=/dev/null MAX_LOAD=1.0 MAX_WAIT=600
#   CELL_LOAD=1.0 CELL_WAIT=120 (before each cell, a server at a load: wait up
#     to CELL_WAIT s for the 1-minute load average to fall below CELL_LOAD, else
#     say so; each run's line in runs.jsonl has loadavg_before and quiet)
#   OUT=target/bench-results/<time>-<mode>
# Ports (loopback only): WEBHOOK_PORT=18443 ADMIN_PORT=18080 CONSTANT_PORT=18444
#   PARSE_ALL_PORT=18445 QUIET_PORT=18446 QUIET_ADMIN_PORT=18081 FLOOR_PORT=18447
#   START_PORT=18453 START_ADMIN_PORT=18090
#
# Bodies are compact JSON, as a kube-apiserver sends them (bench/bench.py
# compact re-serialises the pretty-printed fixtures); the PRETTY_LOADS runs
# send the fixture as captured, pretty-printed, to show what that costs.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-full}
case "$MODE" in
full | smoke | soak) ;;
*)
    sed -n '2,35p' "$0"
    exit 2
    ;;
esac

if [ "$MODE" = smoke ]; then
    : "${ROUNDS:=1}" "${DURATION:=1s}" "${STARTS:=3}" "${SETTLE:=0}" "${MAX_WAIT:=0}" "${WARMUP:=0.2}" "${CELL_WAIT:=0}"
    : "${CONCURRENCY:=1 64}" "${PRETTY_LOADS=c1}" "${RSS_SECS:=2}"
fi
if [ "$MODE" = soak ]; then
    : "${SOAK_SECS:=600}"
fi
: "${ROUNDS:=3}" "${DURATION:=10s}" "${CONCURRENCY:=1 8 64}" "${RATE=1000}" "${RATE_CONNECTIONS:=8}"
: "${ENDPOINTS:=validate allowed mutate}" "${SERVERS:=webhook floor constant parse-all}" "${PRETTY_LOADS=c1 c64}"
: "${SCALE:=1}" "${SCALE_SIZES:=64KiB:65536 1MiB:1048576}" "${SCALE_DURATION:=$DURATION}"
: "${STARTS:=10}" "${SOAK_SECS:=600}" "${SOAK_CONCURRENCY:=64}" "${RSS_INTERVAL:=10}" "${SETTLE:=1}"
: "${RSS_SECS:=20}" "${FLOOR_PORT:=18447}"
: "${WARMUP:=1}" "${LOG_LEVEL:=info}" "${WEBHOOK_LOG:=/dev/null}" "${MAX_LOAD:=1.0}" "${MAX_WAIT:=600}"
: "${WEBHOOK_PORT:=18443}" "${ADMIN_PORT:=18080}" "${CONSTANT_PORT:=18444}" "${PARSE_ALL_PORT:=18445}"
: "${QUIET_PORT:=18446}" "${QUIET_ADMIN_PORT:=18081}" "${START_PORT:=18453}" "${START_ADMIN_PORT:=18090}"
: "${OUT:=target/bench-results/$(date +%Y%m%d-%H%M%S)-$MODE}"
export LOG_LEVEL

FIXTURES=tests/fixtures/admission
declare -A FIXTURE=(
    [validate]=$FIXTURES/07-allow-data-loss-true-kubectl-annotate-alice-validate.json
    [allowed]=$FIXTURES/01-create-kubectl-apply-validate.json
    [mutate]=$FIXTURES/07-allow-data-loss-true-kubectl-annotate-alice-mutate.json
)
# The path each body is posted to.
declare -A ROUTE=([validate]=validate [allowed]=validate [mutate]=mutate)
declare -A BODY=() # the compact bodies, written into $OUT
declare -A PORT=([webhook]=$WEBHOOK_PORT [webhook-quiet]=$QUIET_PORT [constant]=$CONSTANT_PORT
    [parse-all]=$PARSE_ALL_PORT [floor]=$FLOOR_PORT)
declare -A PID=()
WEBHOOK=target/release/pipelinerollout-webhook
REFERENCE=target/release/reference_server
PY="python3 bench/bench.py"
CLK_TCK=$(getconf CLK_TCK)

log() { printf '[load.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# shellcheck source=bench/common.sh
. bench/common.sh

cleanup() {
    for name in "${!PID[@]}"; do
        kill -TERM "${PID[$name]}" 2>/dev/null || true
    done
    for name in "${!PID[@]}"; do
        wait "${PID[$name]}" 2>/dev/null || true
    done
}
trap cleanup EXIT

# --- tools ------------------------------------------------------------------

ensure_oha() {
    export PATH="$HOME/.cargo/bin:$PATH"
    if command -v oha >/dev/null 2>&1; then
        return
    fi
    log "oha not found: installing it from crates.io (cargo install oha --locked)"
    cargo info oha >/dev/null
    cargo install oha --locked
}

build() {
    log "building the release binary and the reference servers"
    cargo build --release --bin pipelinerollout-webhook
    cargo build --release -p bench --bin reference_server
}

rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo -1; }

# User + system CPU time of a process, in clock ticks (fields 14 and 15 of
# /proc/PID/stat; the command name, field 2, has no spaces here).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo -1; }

wait_port() { # port pid
    local i
    for i in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
            return 0
        fi
        kill -0 "$2" 2>/dev/null || {
            log "process $2 exited before listening on $1"
            return 1
        }
        sleep 0.05
    done
    log "nothing listening on $1"
    return 1
}

wait_ready() { # admin port
    local i
    for i in $(seq 1 200); do
        if curl -fsS "http://127.0.0.1:$1/readyz" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.05
    done
    log "webhook not ready"
    return 1
}

start_servers() {
    local server
    for server in $SERVERS; do
        case "$server" in
        webhook)
            "$WEBHOOK" --listen "127.0.0.1:$WEBHOOK_PORT" --admin-listen "127.0.0.1:$ADMIN_PORT" \
                --tls-cert "$CERTS/tls.crt" --tls-key "$CERTS/tls.key" \
                --shutdown-delay 0s --shutdown-grace 2s 2>"$WEBHOOK_LOG" &
            PID[webhook]=$!
            wait_ready "$ADMIN_PORT"
            ;;
        webhook-quiet)
            LOG_LEVEL=warn "$WEBHOOK" --listen "127.0.0.1:$QUIET_PORT" --admin-listen "127.0.0.1:$QUIET_ADMIN_PORT" \
                --tls-cert "$CERTS/tls.crt" --tls-key "$CERTS/tls.key" \
                --shutdown-delay 0s --shutdown-grace 2s 2>"$WEBHOOK_LOG" &
            PID[webhook-quiet]=$!
            wait_ready "$QUIET_ADMIN_PORT"
            ;;
        floor | constant | parse-all)
            "$REFERENCE" --mode "$server" --listen "127.0.0.1:${PORT[$server]}" --certs "$CERTS" \
                2>"$OUT/$server.log" &
            PID[$server]=$!
            wait_port "${PORT[$server]}" "${PID[$server]}"
            ;;
        *)
            log "unknown server $server"
            exit 2
            ;;
        esac
        log "$server: pid ${PID[$server]}, https://127.0.0.1:${PORT[$server]}"
    done
}

stop_servers() {
    local name
    for name in "${!PID[@]}"; do
        kill -TERM "${PID[$name]}" 2>/dev/null || true
        wait "${PID[$name]}" 2>/dev/null || true
        unset "PID[$name]"
    done
}

# One oha run; its JSON goes to $OUT/raw and a line to $OUT/runs.jsonl.
#   run_oha KIND SERVER ENDPOINT BODY LOAD DURATION [EXTRA JSON FIELDS]
# LOAD is cN (closed loop, N connections) or qR (open loop at R req/s).
run_oha() {
    local kind=$1 server=$2 endpoint=$3 body=$4 load=$5 duration=$6 extra=${7:-}
    local file="raw/$kind-$RUN_ROUND-$endpoint-$load-$server${SIZE_TAG:-}.json"
    local args=(--no-tui --output-format json -o "$OUT/$file" -m POST -T application/json
        -D "$body" --cacert "$CERTS/ca.crt" --http-version 1.1 -z "$duration" -w)
    case "$load" in
    c*) args+=(-c "${load#c}") ;;
    q*) args+=(-c "$RATE_CONNECTIONS" -q "${load#q}" --latency-correction) ;;
    esac
    if [ "$WARMUP" != 0 ]; then
        rm -f "$OUT/run.db"
        args+=(--db-url "$OUT/run.db")
    fi
    local pid=${PID[$server]} before after cpu_before cpu_after
    quiet_cell
    before=$(rss "$pid")
    cpu_before=$(cpu_ticks "$pid")
    oha "${args[@]}" "https://127.0.0.1:${PORT[$server]}/${ROUTE[$endpoint]}?timeout=10s" >/dev/null 2>&1
    cpu_after=$(cpu_ticks "$pid")
    after=$(rss "$pid")
    if [ "$WARMUP" != 0 ]; then
        $PY trim "$OUT/run.db" "$WARMUP" "$OUT/$file.trim.json"
        rm -f "$OUT/run.db"
    fi
    printf '{"kind":"%s","round":%s,"server":"%s","endpoint":"%s","load":"%s","file":"%s","rss_before_kib":%s,"rss_after_kib":%s,"cpu_ticks":%s,"clk_tck":%s,"loadavg_before":%s,"quiet":%s%s}\n' \
        "$kind" "$RUN_ROUND" "$server" "$endpoint" "$load" "$file" "$before" "$after" \
        "$((cpu_after - cpu_before))" "$CLK_TCK" "$CELL_LOADAVG" "$CELL_QUIET" "$extra" >>"$OUT/runs.jsonl"
    python3 - "$OUT/$file" "$kind $RUN_ROUND $endpoint $load $server" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
p = {k: v * 1e3 for k, v in d["latencyPercentiles"].items()}
rps = d["summary"]["requestsPerSec"]
bad = sum(d.get("errorDistribution", {}).values()) + sum(
    n for c, n in d.get("statusCodeDistribution", {}).items() if c != "200")
note = ""
if os.path.exists(sys.argv[1] + ".trim.json"):
    t = json.load(open(sys.argv[1] + ".trim.json"))
    note = f"  (whole run: p99 {p['p99']:.3f}, p99.9 {p['p99.9']:.3f})"
    rps, p = t["rps"], {k: t[k] * 1e3 for k in ("p50", "p99", "p99.9")}
print(f"  {sys.argv[2]:<40} {rps:>9,.0f} req/s  p50 {p['p50']:7.3f}  "
      f"p99 {p['p99']:7.3f}  p99.9 {p['p99.9']:7.3f} ms  errors {bad}{note}", file=sys.stderr)
EOF
    sleep "$SETTLE"
}

meta() {
    local oha_version git
    oha_version=$(oha --version | head -1)
    git="$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    if [ -n "$(git status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null)" ]; then
        git="$git + uncommitted changes in src/Cargo"
    fi
    python3 - "$OUT/meta.json" <<EOF
import json, sys
cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
mem = next(l.split(":", 1)[1].strip() for l in open("/proc/meminfo") if l.startswith("MemTotal"))
json.dump({
    "started": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "mode": "$MODE", "cpu": cpu,
    "nproc": $(nproc), "mem": f"{int(mem.split()[0]) // 1024} MiB", "kernel": "$(uname -r)",
    "loadavg_before": "$(cut -d' ' -f1-3 /proc/loadavg)", "git": "$git", "oha": "$oha_version",
    "rounds": $ROUNDS, "duration": "$DURATION", "log_level": "$LOG_LEVEL", "warmup": "$WARMUP",
    "rate_connections": $RATE_CONNECTIONS,
}, open(sys.argv[1], "w"))
EOF
}

set_meta() { # key json-value
    python3 - "$OUT/meta.json" "$1" "$2" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m[sys.argv[2]] = json.loads(sys.argv[3])
json.dump(m, open(sys.argv[1], "w"))
EOF
}

# --- main ---------------------------------------------------------------------

ensure_oha
build
mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
for endpoint in "${!FIXTURE[@]}"; do
    BODY[$endpoint]=$OUT/$endpoint.json
    $PY compact "${FIXTURE[$endpoint]}" "${BODY[$endpoint]}" >&2
done
CERTS=$(mktemp -d)/certs
"$REFERENCE" --generate-only --certs "$CERTS" >/dev/null
log "certificates in $CERTS; results in $OUT"
wait_for_quiet
meta

if [ "$MODE" = soak ]; then
    SERVERS=webhook
    start_servers
    RUN_ROUND=0
    pid=${PID[webhook]}
    log "soak: $SOAK_SECS s at concurrency $SOAK_CONCURRENCY on /validate; RSS every $RSS_INTERVAL s"
    oha --no-tui --output-format json -o "$OUT/soak.json" -m POST -T application/json \
        -D "${BODY[validate]}" --cacert "$CERTS/ca.crt" --http-version 1.1 \
        -z "${SOAK_SECS}s" -w -c "$SOAK_CONCURRENCY" \
        "https://127.0.0.1:$WEBHOOK_PORT/validate?timeout=10s" >/dev/null &
    OHA=$!
    t=0
    while kill -0 "$OHA" 2>/dev/null; do
        printf '{"t":%s,"rss_kib":%s}\n' "$t" "$(rss "$pid")" | tee -a "$OUT/rss.jsonl" >&2
        sleep "$RSS_INTERVAL"
        t=$((t + RSS_INTERVAL))
    done
    wait "$OHA"
    printf '{"t":"end","rss_kib":%s}\n' "$(rss "$pid")" | tee -a "$OUT/rss.jsonl" >&2
    stop_servers
    $PY soak-report "$OUT" | tee "$OUT/report.md"
    exit 0
fi

start_servers
for server in $SERVERS; do
    for endpoint in $ENDPOINTS; do
        $PY check "https://127.0.0.1:${PORT[$server]}/${ROUTE[$endpoint]}" "${BODY[$endpoint]}" "$CERTS/ca.crt"
    done
done
sleep 1
if [ -n "${PID[webhook]:-}" ]; then
    set_meta webhook_rss_idle_kib "$(rss "${PID[webhook]}")"
fi

LOADS=()
for c in $CONCURRENCY; do LOADS+=("c$c"); done
[ -n "$RATE" ] && LOADS+=("q$RATE")

for RUN_ROUND in $(seq 1 "$ROUNDS"); do
    log "round $RUN_ROUND of $ROUNDS"
    for endpoint in $ENDPOINTS; do
        for load in "${LOADS[@]}"; do
            for server in $SERVERS; do
                run_oha matrix "$server" "$endpoint" "${BODY[$endpoint]}" "$load" "$DURATION"
            done
        done
    done
    for load in $PRETTY_LOADS; do
        for server in $SERVERS; do
            run_oha pretty "$server" validate "${FIXTURE[validate]}" "$load" "$DURATION"
        done
    done
done

if [ "$RSS_SECS" != 0 ]; then
    # From a fresh start, so the figure is what c64 alone leaves resident.
    if [ -n "${PID[webhook]:-}" ]; then
        set_meta webhook_rss_matrix_end_kib "$(rss "${PID[webhook]}")"
    fi
    stop_servers
    start_servers
    RUN_ROUND=1
    log "resident memory after ${RSS_SECS} s at c64, each server freshly started"
    for server in $SERVERS; do
        run_oha rss "$server" validate "${BODY[validate]}" c64 "${RSS_SECS}s"
    done
fi

if [ "$SCALE" = 1 ]; then
    for spec in $SCALE_SIZES; do
        name=${spec%%:*}
        bytes=${spec#*:}
        $PY grow "${BODY[validate]}" "$bytes" "$OUT/scale-$name.json" >&2
    done
    for RUN_ROUND in $(seq 1 "$ROUNDS"); do
        for spec in $SCALE_SIZES; do
            name=${spec%%:*}
            body="$OUT/scale-$name.json"
            size=$(stat -c %s "$body")
            SIZE_TAG="-$name"
            for server in $SERVERS; do
                run_oha scale "$server" validate "$body" c1 "$SCALE_DURATION" \
                    ",\"size\":\"$name\",\"body_bytes\":$size"
            done
            SIZE_TAG=
        done
    done
fi

if [ -n "${PID[webhook]:-}" ]; then
    set_meta webhook_rss_end_kib "$(rss "${PID[webhook]}")"
fi
stop_servers

if [ "$STARTS" -gt 0 ]; then
    log "start to ready: $STARTS starts"
    $PY ready "$STARTS" "$OUT/starts.json" "$START_ADMIN_PORT" -- "$WEBHOOK" \
        --listen "127.0.0.1:$START_PORT" --admin-listen "127.0.0.1:$START_ADMIN_PORT" \
        --tls-cert "$CERTS/tls.crt" --tls-key "$CERTS/tls.key" \
        --shutdown-delay 0s --shutdown-grace 1s >&2
fi
set_meta loadavg_after "\"$(cut -d' ' -f1-3 /proc/loadavg)\""

$PY report "$OUT" | tee "$OUT/report.md"
log "report: $OUT/report.md"
