# Shared by bench/load.sh, bench/flood.sh and bench/audit.sh (sourced; each
# defines `log`).

# wait_for_quiet [STEP]: while the 1-minute load average is above MAX_LOAD
# (others compiling?), wait STEP seconds (default 60), for at most MAX_WAIT
# seconds in all; then log the load averages.
wait_for_quiet() {
    local step=${1:-60} waited=0 load
    load=$(cut -d' ' -f1 /proc/loadavg)
    while awk -v l="$load" -v m="$MAX_LOAD" 'BEGIN { exit !(l > m) }' && [ "$waited" -lt "$MAX_WAIT" ]; do
        log "load average $load > $MAX_LOAD (others compiling?): waiting $step s"
        sleep "$step"
        waited=$((waited + step))
        load=$(cut -d' ' -f1 /proc/loadavg)
    done
    log "load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

# quiet_cell: before one cell (a server at a load), wait up to CELL_WAIT
# seconds (default 120) for the 1-minute load average to fall below
# CELL_LOAD (default 1.0), looking every 5 s; log when it did not. Sets
# CELL_LOADAVG (the load average it started the cell at) and CELL_QUIET
# (true or false).
quiet_cell() {
    local limit=${CELL_LOAD:-1.0} max=${CELL_WAIT:-120} waited=0
    CELL_LOADAVG=$(cut -d' ' -f1 /proc/loadavg)
    while awk -v l="$CELL_LOADAVG" -v m="$limit" 'BEGIN { exit !(l >= m) }' && [ "$waited" -lt "$max" ]; do
        sleep 5
        waited=$((waited + 5))
        CELL_LOADAVG=$(cut -d' ' -f1 /proc/loadavg)
    done
    if awk -v l="$CELL_LOADAVG" -v m="$limit" 'BEGIN { exit !(l >= m) }'; then
        CELL_QUIET=false
        log "load average still $CELL_LOADAVG (not below $limit) after ${waited} s: running this cell anyway"
    else
        CELL_QUIET=true
    fi
}
