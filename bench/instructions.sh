#!/usr/bin/env bash
# The instruction-count guard: counts the instructions each scenario of
# bench/src/bin/counted/ executes per operation under callgrind, and compares
# them with bench/instructions-baseline.txt. Instruction counts hardly move
# on a busy machine, unlike wall time, so CI can fail on a small growth.
#
#   bench/instructions.sh                 count every scenario once, compare
#   bench/instructions.sh --runs 3        count each three times (median compared), show the spread
#   bench/instructions.sh --update        count, then rewrite the baseline with the counts
#   bench/instructions.sh NAME...         only these scenarios (`counted list` names them)
#   bench/instructions.sh --baseline FILE compare with (or --update) another file
#
# Fails (exit 1) when a scenario's count grows by more than MARGIN percent
# (default 3) over its baseline, or has no baseline; a count that shrinks
# by more than that is a note to update the baseline. Only the scenario's
# measured loop counts (callgrind --toggle-collect), divided by its
# iterations. Needs valgrind (Debian: apt-get install -y valgrind).
# COUNTED_BIN=path skips the build and counts that binary; the callgrind
# files stay in OUT (default target/instructions).
set -euo pipefail
cd "$(dirname "$0")/.."

MARGIN=${MARGIN:-3}
RUNS=1
UPDATE=false
BASELINE=bench/instructions-baseline.txt
OUT=${OUT:-target/instructions}
only=()
while [ $# -gt 0 ]; do
    case $1 in
        --update) UPDATE=true ;;
        --runs) RUNS=$2; shift ;;
        --baseline) BASELINE=$2; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        -*) echo "instructions.sh: unknown option $1" >&2; exit 2 ;;
        *) only+=("$1") ;;
    esac
    shift
done

command -v valgrind >/dev/null || {
    echo "instructions.sh: valgrind is missing (Debian: apt-get install -y valgrind)" >&2
    exit 2
}
if [ -z "${COUNTED_BIN:-}" ]; then
    cargo build --profile counted -p bench --bin counted --locked
    COUNTED_BIN=target/counted/counted
fi
mkdir -p "$OUT"
# Lines of the decision log and RUST_LOG must not change what is counted.
unset RUST_LOG LOG_LEVEL LOG_FORMAT

# count NAME ITERATIONS RUN: prints the instructions per iteration.
count() {
    local name=$1 n=$2 run=$3 file
    file=$OUT/$name.$run
    if ! valgrind --tool=callgrind --collect-atstart=no \
        --toggle-collect='counted::measured_loop*' \
        --callgrind-out-file="$file.callgrind" --log-file="$file.valgrind" \
        "$COUNTED_BIN" run "$name" --iterations "$n" >"$file.stdout" 2>"$file.stderr"; then
        echo "instructions.sh: $name failed under valgrind; the last lines of $file.stderr:" >&2
        grep -v ' INFO ' "$file.stderr" | tail -5 >&2
        return 1
    fi
    awk -v n="$n" '/^(summary|totals):/ { total = $2 } END {
        if (total == "" || total == 0) exit 1; printf "%d\n", total / n }' "$file.callgrind" || {
        echo "instructions.sh: $name: no instructions counted in $file.callgrind (did the toggle match counted::measured_loop?)" >&2
        return 1
    }
}

declare -A baseline=()
if [ -f "$BASELINE" ]; then
    while read -r name value _; do
        case $name in '#'*|'') continue ;; esac
        baseline[$name]=$value
    done <"$BASELINE"
fi

names=() counts=() spreads=()
while read -r name n; do
    if [ ${#only[@]} -gt 0 ] && ! printf '%s\n' "${only[@]}" | grep -qxF "$name"; then
        continue
    fi
    runs=()
    for run in $(seq "$RUNS"); do
        runs+=("$(count "$name" "$n" "$run")")
    done
    sorted=$(printf '%s\n' "${runs[@]}" | sort -n)
    median=$(echo "$sorted" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    spread=$(echo "$sorted" | awk -v runs="$RUNS" 'NR == 1 { lo = $1 } { hi = $1 } END {
        if (runs > 1) printf "%.2f%%", (hi - lo) * 100 / lo; else printf "-" }')
    names+=("$name") counts+=("$median") spreads+=("$spread")
    echo "counted $name: ${runs[*]} instructions per iteration ($n iterations)" >&2
done < <("$COUNTED_BIN" list)
[ ${#names[@]} -gt 0 ] || { echo "instructions.sh: no scenario matched ${only[*]}" >&2; exit 2; }

status=0 grown=() shrunk=() missing=()
printf '%-28s %12s %12s %9s %9s\n' scenario baseline now change "spread"
for i in "${!names[@]}"; do
    name=${names[$i]} now=${counts[$i]} base=${baseline[${names[$i]}]:-}
    if [ -z "$base" ]; then
        printf '%-28s %12s %12d %9s %9s\n' "$name" - "$now" - "${spreads[$i]}"
        missing+=("$name")
        continue
    fi
    change=$(awk -v a="$base" -v b="$now" 'BEGIN { printf "%+.2f", (b - a) * 100 / a }')
    printf '%-28s %12d %12d %8s%% %9s\n' "$name" "$base" "$now" "$change" "${spreads[$i]}"
    if awk -v c="$change" -v m="$MARGIN" 'BEGIN { exit !(c > m) }'; then
        grown+=("$name ($change %)")
    elif awk -v c="$change" -v m="$MARGIN" 'BEGIN { exit !(c < -m) }'; then
        shrunk+=("$name ($change %)")
    fi
done

if $UPDATE; then
    {
        echo "# Instructions per operation of each scenario of bench/src/bin/counted/,"
        echo "# counted by bench/instructions.sh under callgrind (cargo profile"
        echo "# \`counted\`). Rewritten on purpose by \`bench/instructions.sh --update\`,"
        echo "# in the commit whose change explains the new counts."
        echo "# $(valgrind --version), $(rustc --version | cut -d' ' -f1-2), $(uname -m)"
        for i in "${!names[@]}"; do
            echo "${names[$i]} ${counts[$i]}"
        done
        # Keep the baselines of scenarios not counted this time.
        for name in "${!baseline[@]}"; do
            printf '%s\n' "${names[@]}" | grep -qxF "$name" || echo "$name ${baseline[$name]}"
        done
    } >"$BASELINE.new"
    mv "$BASELINE.new" "$BASELINE"
    echo "wrote $BASELINE"
    exit 0
fi

for line in "${shrunk[@]}"; do
    echo "note: $line fell by more than $MARGIN %: if the change that did it is yours, run bench/instructions.sh --update and commit $BASELINE with it"
done
for name in "${missing[@]}"; do
    echo "FAIL: $name has no baseline in $BASELINE: run bench/instructions.sh --update and commit it" >&2
    status=1
done
for line in "${grown[@]}"; do
    echo "FAIL: $line grew by more than $MARGIN % over $BASELINE" >&2
    status=1
done
if [ $status -ne 0 ] && [ ${#grown[@]} -gt 0 ]; then
    echo "If the growth is meant (a rule or a feature that costs it), run bench/instructions.sh --update and commit $BASELINE in the same commit, saying why; otherwise find the cost with callgrind_annotate --inclusive=yes $OUT/<scenario>.1.callgrind" >&2
fi
exit $status
