#!/usr/bin/env bash
# Load: N concurrent MCP clients (default 50; the official TypeScript SDK on
# Streamable HTTP, legacy SSE and `idpool mcp` stdio bridges, mixed) x M calls
# (default 100) of get_reviews, extract, scrape (HTTP and browser) and
# pool_status against the bundled testbed, with faults switched on every half
# second (5xx, slow, resets, truncation, a blocked AJAX tier, challenges,
# rate limits). Every answer is checked against the testbed's ground truth.
# Reports calls by result, p50/p99 per tool, the daemon's RSS/PSS and fds at
# start, after warm-up and at the end, and the Chromium processes left; exits
# non-zero unless: zero protocol errors, every call correct or a tool error
# with a reason, RSS at the end within 10% of after warm-up, fds back to the
# warm-up count, no Chromium beyond the pool's own.
#
#   ./scripts/load.sh [--clients 50] [--calls 100] [--soak SECONDS]
#
# Ports: testbed 127.0.0.1:18443 (HTTPS) / :18080, daemon 127.0.0.1:18790,
# Chromium DevTools 19400+. State and logs in .idpool/load/.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
clients=50 calls=100 soak=0
while [ $# -gt 0 ]; do
  case "$1" in
    --clients) clients="$2"; shift 2 ;;
    --calls) calls="$2"; shift 2 ;;
    --soak) soak="$2"; shift 2 ;;
    *) echo "usage: $0 [--clients N] [--calls M] [--soak SECONDS]" >&2; exit 2 ;;
  esac
done
ensure_packages
ensure_cargo
ensure_node_deps
# IDPOOL_LOAD_PROFILE=debug: the debug build (faster to build, slower to run).
profile="${IDPOOL_LOAD_PROFILE:-release}"
log "building ($profile)"
if [ "$profile" = release ]; then
  cargo build --locked --release --workspace --bins
  bin=target/release
else
  cargo build --locked --workspace --bins
  bin=target/debug
fi
work=.idpool/load
config=scripts/load.toml
rm -rf "$work"
mkdir -p "$work/strategies"
sed 's#https://127.0.0.1:8443#https://127.0.0.1:18443#g' strategies/testshop.toml >"$work/strategies/testshop.toml"

tb_pid="" d_pid=""
cleanup() {
  [ -n "$d_pid" ] && kill "$d_pid" 2>/dev/null && wait "$d_pid" 2>/dev/null || true
  [ -n "$tb_pid" ] && kill "$tb_pid" 2>/dev/null && wait "$tb_pid" 2>/dev/null || true
}
trap cleanup EXIT

"$bin/idpool-testbed" --https 127.0.0.1:18443 --http 127.0.0.1:18080 --state-dir "$work/testbed" \
  >"$work/testbed.out" 2>"$work/testbed.log" &
tb_pid=$!
for _ in $(seq 100); do grep -q '^ready' "$work/testbed.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^ready' "$work/testbed.out" || { cat "$work/testbed.log" >&2; echo "testbed did not start (ports 18443/18080 busy?)" >&2; exit 1; }
"$bin/idpool" --config "$config" serve 2>"$work/daemon.log" &
d_pid=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:18790/healthz >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf http://127.0.0.1:18790/healthz >/dev/null || { cat "$work/daemon.log" >&2; echo "the daemon did not start (port 18790 busy?)" >&2; exit 1; }

log "load: $clients clients x $([ "$soak" != 0 ] && echo "${soak}s soak" || echo "$calls calls"), faults on"
status=0
node tests/mcp-js/load.mjs --daemon http://127.0.0.1:18790 --testbed https://127.0.0.1:18443 \
  --testbed-control http://127.0.0.1:18080 --pid "$d_pid" --data-dir "$(pwd)/$work/data" \
  --idpool "$bin/idpool" --config "$config" --clients "$clients" --calls "$calls" --soak "$soak" \
  >"$work/report.json" || status=$?
log "stopping the daemon"
kill -TERM "$d_pid"
dstatus=0
wait "$d_pid" || dstatus=$?
d_pid=""
[ "$dstatus" -eq 0 ] || { tail -20 "$work/daemon.log" >&2; echo "the daemon exited with $dstatus" >&2; exit 1; }
echo "report: $work/report.json; daemon log: $work/daemon.log"
exit "$status"
