# What scripts/cpu-scale.sh and scripts/gpu-race.sh share (sourced by both, not run): a log
# line, the watchdog every command of a race runs under, and the synthetic files raced.
# Both expect $log (the log file) and $budget (seconds, counted from the script's start by
# bash's $SECONDS).

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

# make_files SHAPE...: a synthetic file of each shape made in $work by
# scripts/make_synthetic_gguf.py with $python and the carried $wheels, each under the
# watchdog: a Llama shape with random Q4_0 weights, a Q8_0 embedding and $vocab's tokenizer;
# gemma3 in Gemma-3-270M's own mix of formats with $gemma_vocab's (its 262 144-row
# embedding needs Gemma's tokenizer). The shapes made are left in the array `made`. Stops
# the script when $python cannot import gguf and numpy. Also expects $root.
# With RACE_FILES set to a folder (scripts/lease.sh sets it, so that its two races make
# each file once), a file is made there unless a whole one is there already, and $work gets
# a link to it (the script writes a temporary file and renames it, so a file there is
# whole); the same arguments make the same bytes, so either race may make it.
make_files() {
    export PYTHONPATH="$(IFS=:; echo "${wheels[*]}")${PYTHONPATH:+:$PYTHONPATH}"
    if ! "$python" -c "import gguf, numpy; print('== gguf from', gguf.__file__, '; numpy', numpy.__version__)" >>"$log" 2>&1; then
        say "error: $python cannot import gguf and numpy (see the log); set SCALE_PYTHON to one that has numpy"
        exit 1
    fi
    say "making the files in $work"
    made=()
    local s rc mix tokenizer dir="${RACE_FILES:-$work}"
    for s in "$@"; do
        rc=0
        mix=q4_0 tokenizer="$vocab"
        [[ $s == gemma3 ]] && mix=q4_k_m tokenizer="${gemma_vocab:?}"
        if [[ -f "$dir/$s.gguf" ]]; then
            say "$s.gguf is already made in $dir"
        else
            run 200 "$python" "$root/scripts/make_synthetic_gguf.py" --shape "$s" --mix "$mix" \
                --tokenizer-from "$tokenizer" --out "$dir/$s.gguf" >>"$log" 2>"$work/make.err" || rc=$?
            tr '\r' '\n' <"$work/make.err" | grep -v '^ *[0-9]*/[0-9]* tensors' >>"$log" || true # not the progress
        fi
        [[ "$dir" == "$work" || $rc -ne 0 ]] || ln -s "$dir/$s.gguf" "$work/$s.gguf"
        if ((rc == 0)); then
            made+=("$s")
            say "made $s.gguf ($(du -mL "$work/$s.gguf" | cut -f1) MB)"
        else
            say "making $s.gguf failed (status $rc; 124: out of time); it is not raced"
        fi
    done
}
