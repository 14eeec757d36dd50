#!/usr/bin/env bash
# Chapter 11's soak: the server under ten minutes of load with random cancellations, then
# the checks the book reports. CI does not run it (it takes ten minutes).
#
#   cargo xtask perf ch11-soak            # the book's file: book/src/measured/ch11-soak.txt
#   bash scripts/soak.sh [MODEL.gguf]     # the report alone (default: SmolLM2, fetched as
#                                         # chapter 9 fetches it)
#
# It starts `ch11-server --parallel 8` on a free loopback port, runs `ch11-server loadtest
# --clients 8 --cancel-rate 0.2` until the load test's own 600-second limit stops it, and
# samples the server's resident memory every minute. Then it reads /metrics (requests by
# outcome, running sequences, KV blocks in use), stops the server with SIGTERM, and prints
# its exit code. It fails if a request ended other than stop, length or cancelled, if any sequence or KV
# block is still held, or if the server does not exit 0. The report goes to standard output
# (which `cargo xtask perf` heads with the machine, the load, the date and the commit);
# progress goes to standard error.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cargo build --release -q -p ch11-server
target="${CARGO_TARGET_DIR:-target}"
[[ "$target" = /* ]] || target="$root/$target"
bin="$target/release/ch11-server"
model=()
if [[ $# -gt 0 ]]; then model=(-m "$1"); fi
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
url="http://127.0.0.1:$port"
log="$(mktemp)"
"$bin" "${model[@]}" --port "$port" --parallel 8 -t 2 >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 600); do
  curl -sf "$url/health" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { cat "$log"; echo "soak: the server did not start" >&2; exit 1; }
  sleep 0.1
done
rss() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$server/status"; }
echo "soak: server pid $server on $url" >&2
echo "soak: ch11-server --parallel 8 -t 2, loadtest --clients 8 --cancel-rate 0.2 for up to 600 s"
echo "soak: resident $(rss) MB at the start"
(
  for minute in $(seq 10); do
    sleep 60
    kill -0 "$server" 2>/dev/null || exit 0
    echo "soak: minute $minute, resident $(rss) MB"
  done
) &
sampler=$!
"$bin" loadtest --url "$url" --clients 8 --requests 100000 --cancel-rate 0.2
kill "$sampler" 2>/dev/null || true
echo "soak: resident $(rss) MB at the end"
metrics="$(curl -sf "$url/metrics")"
grep -E '^llm_(requests_total|running_sequences|kv_blocks_used|queue_length)' <<<"$metrics"
kill -TERM "$server"
set +e
wait "$server"
code=$?
set -e
echo "soak: the server exited with code $code after SIGTERM"
trap 'rm -f "$log"' EXIT
failed="$(awk '/^llm_requests_total\{/ && !/outcome="(stop|length|cancelled)"/ {s += $2} END {print s + 0}' <<<"$metrics")"
held="$(awk '/^llm_(running_sequences|kv_blocks_used) / {s += $2} END {print s + 0}' <<<"$metrics")"
if [[ "$failed" != 0 || "$held" != 0 || "$code" != 0 ]]; then
  echo "soak: FAILED ($failed failed requests, $held sequences and blocks still held, exit code $code)" >&2
  exit 1
fi
echo "soak: passed"
