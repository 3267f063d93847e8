#!/usr/bin/env bash
# Fuzz every parser that reads bytes someone else chose (fuzz/fuzz_targets:
# ClientHello, HTTP/2 + HPACK, HTTP/1 heads, strategy TOML, extraction,
# session files, the SSE stream, JSON-RPC messages, structured data) with cargo-fuzz under
# nightly, SECONDS per target (default 60). Prints executions and coverage per
# target; a crash stops the script and leaves its input in fuzz/artifacts/
# (turn it into a case in tests/offline/properties.rs).
#
#   ./scripts/fuzz.sh            # 60 s per target
#   ./scripts/fuzz.sh 600 h2_frames
#   ./scripts/fuzz.sh --smoke    # the suite's smoke run: the hostile-input
#                                # targets (HTML conversions, selectors, the
#                                # jar, structured data) for 20 s each, 0 crashes
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--smoke" ]; then
    shift
    set -- "${IDPOOL_FUZZ_SMOKE_SECS:-20}" html_convert selector jar structured
fi
secs="${1:-60}"
shift || true
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null; then
    cargo install cargo-fuzz --locked
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
mkdir -p .idpool/fuzz
printf '%-16s %12s %10s %10s\n' target executions cov features
for t in "${targets[@]}"; do
    log=".idpool/fuzz/$t.log"
    if ! cargo +nightly fuzz run "$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
        echo "$t: CRASH (see $log and fuzz/artifacts/$t/)" >&2
        tail -30 "$log" >&2
        exit 1
    fi
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo '?')
    ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | grep -oE '[0-9]+' || echo '?')
    printf '%-16s %12s %10s %10s\n' "$t" "$runs" "$cov" "$ft"
done
