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
