#!/usr/bin/env bash
# The side-by-side benchmark (DESIGN §10): idpool against the raw libraries it
# uses (wreq, chromiumoxide), the load limit (wrk, h2load on the same nginx
# target) and the Python stack it replaces (curl_cffi + json / lxml), in
# interleaved rounds, medians and ratios from one run. Loopback only.
#
#   ./scripts/bench.sh            3 rounds of 5 s per row (about 8 minutes on 2 cores)
#   ./scripts/bench.sh --quick    one short round: a smoke test that the bench works
#   ./scripts/bench.sh --rounds 5 --seconds 10
#   IDPOOL_SKIP_BUILD=1 ./scripts/bench.sh --quick --profile debug
#                                 the smoke run scripts/test.sh makes on the test build
#   ./scripts/bench.sh --versus-rev REV
#                                 also builds commit REV and measures its daemon and
#                                 pool rows in the same rounds: before/after in one run
#
# Writes bench/results/<time>/report.md and raw.json (and bench/results/latest.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

ensure_bench_packages() {
  ensure_debs nginx-light wrk nghttp2-client openssl python3-venv
}

# A venv with the Python predecessor's stack, pinned.
VENV=.idpool/bench-venv
ensure_venv() {
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import curl_cffi, lxml' 2>/dev/null; then
    log "python venv: curl_cffi, lxml"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet curl_cffi==0.17.0 lxml==6.1.3
  fi
}

if [ "${1:-}" = "--setup-only" ]; then
  ensure_bench_packages
  ensure_venv
  exit 0
fi

if [ "${IDPOOL_BENCH_SKIP_SETUP:-}" != 1 ]; then
  ensure_packages
  ensure_bench_packages
  ensure_cargo
  ensure_venv
fi

# --versus-rev REV: build REV first (a worktree under .idpool/) and keep its
# two binaries. Its target folder is one of its own, shared by every REV built
# so (only idpool compiles again for the next): in the main one REV's build
# wrote idpool's artifacts under the same names as this tree's (the hash is
# of the path within the workspace), the build below then found them fresh,
# and "after" ran REV's code too.
versus=()
if [ "${1:-}" = "--versus-rev" ]; then
  rev=$(git rev-parse --verify "${2:?--versus-rev needs a commit}^{commit}")
  shift 2
  old=.idpool/versus/$rev
  if [ ! -x "$old/bin/idpool" ] || [ ! -x "$old/bin/examples/bench" ]; then
    log "cargo build --release of $rev (the build compared against)"
    rm -rf "$old/src"
    git worktree add --detach "$old/src" "$rev" >/dev/null
    target=$(realpath -m .idpool/versus-target)
    (cd "$old/src" && CARGO_TARGET_DIR="$target" \
      cargo build --locked --release --bin idpool --example bench)
    mkdir -p "$old/bin/examples"
    cp "$target/release/idpool" "$old/bin/idpool"
    cp "$target/release/examples/bench" "$old/bin/examples/bench"
    git worktree remove --force "$old/src"
  fi
  versus=(--versus "$old/bin")
fi

if [ "${IDPOOL_SKIP_BUILD:-}" != 1 ]; then
  log "cargo build --release (idpool, the bench driver)"
  cargo build --locked --release --bin idpool --example bench
fi

exec "$VENV/bin/python" bench/run.py --python "$VENV/bin/python" \
  --target-dir "${CARGO_TARGET_DIR:-target}" "${versus[@]}" "$@"
