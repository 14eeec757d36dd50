# What scripts/cpu-scale.sh and scripts/gpu-race.sh share (sourced by both, not run): a log
# line, and the watchdog every command of a race runs under. Both expect $log (the log
# file) and $budget (seconds, counted from the script's start by bash's $SECONDS).

# say TEXT: TEXT on standard error and in the log, after the seconds since the start.
say() { echo "[$(printf '%4d' "$SECONDS")s] $*" | tee -a "$log" >&2; }

# run SECONDS CMD...: CMD under the watchdog, within what is left of the budget; its status,
# 124 when killed for time, 125 when no time was left to start it.
run() {
    local cap=$1 left=$((budget - SECONDS))
    shift
    ((left > cap)) && left=$cap
    ((left >= 5)) || return 125
    local rc=0
    timeout --kill-after=5 "$left" "$@" || rc=$?
    ((rc == 137)) && rc=124
    return $rc
}
