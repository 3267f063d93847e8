#!/usr/bin/env bash
# The fleet at scale on one machine (issue 36's scenario): a real
# redis-server, the bundled testbed and 10 (then 25) idpool daemons on
# loopback. Prints, as JSON: calls/s and Redis commands per second and per
# call (net of the idle heartbeat) for 20 callers over a fleet in-flight
# bound of 16 and of 24, a 20,000-call closed-loop run by tenth, what the
# fleet sends under a site-wide limit of 10 requests/s and how much is
# refused, a SIGKILLed daemon's places and identities coming back, and at
# 25 x 40 identities the Redis cost per call and per idle identity, then 3
# of those daemons SIGKILLed (more identities than spare slots): when the
# identities without a host show, and how soon a restarted one takes its own.
# With --daemons N: only N daemons x --identities M (default 200) started
# together: identities that moved between live daemons, the slowest beat,
# Redis per idle identity, and what the fleet sends under a site-wide 10/s.
#
#   ./scripts/fleet-bench.sh [--quick] [--calls 20000] [--profile release|debug]
#   ./scripts/fleet-bench.sh --daemons 50 [--identities 200]
#
# Ports: redis 6391, testbed 28443/28080, daemons 28800+, Chromium 21000+
# (no browser is launched). State, logs and report.json in .idpool/fleet-bench/.
# Run it on a quiet machine (no build or test run alongside).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
profile=release
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --quick) args+=(--quick); shift ;;
    --calls) args+=(--calls "$2"); shift 2 ;;
    --daemons) args+=(--daemons "$2"); shift 2 ;;
    --identities) args+=(--identities "$2"); shift 2 ;;
    *) echo "usage: $0 [--quick] [--calls N] [--daemons N [--identities M]] [--profile release|debug]" >&2; exit 2 ;;
  esac
done
if [ -z "${IDPOOL_SKIP_BUILD:-}" ]; then
  ensure_packages
  ensure_cargo
  log "building ($profile)"
  if [ "$profile" = release ]; then
    cargo build --locked --release --workspace --bins
  else
    cargo build --locked --workspace --bins
  fi
fi
exec python3 bench/fleet.py --bin "target/$profile" "${args[@]}"
