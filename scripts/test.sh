#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what is missing, builds from
# scratch, checks formatting and lints, and runs every test inside a network
# namespace that has only a loopback interface (nothing outside 127.0.0.0/8 is
# reachable). `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ensure_packages
# Only the tests need these: Prometheus and promtool (tests/daemon/operator.rs loads
# deploy/prometheus/alerts.yml and the Grafana dashboard's queries into it).
ensure_debs prometheus man-db
ensure_cargo
ensure_node_deps
ensure_py_mcp
ensure_py_kube
# What the bench's smoke run needs (nginx, wrk, h2load, a venv with curl_cffi
# and lxml), installed here: the tests run without a network.
./scripts/bench.sh --setup-only

# --- build --------------------------------------------------------------------
log "cargo fmt --check"
cargo fmt --all -- --check
# The tools' modules are declared by a macro (`tools!`), which cargo fmt
# does not follow: check their files by name.
rustfmt --edition 2024 --check src/tools/*.rs

log "build (tests included)"
cargo test --locked --no-run

log "cargo clippy"
cargo clippy --locked --all-targets -- -D warnings

# --- tests ----------------------------------------------------------------------
log "idpool strategy test (every bundled strategy against its fixtures, offline)"
target/debug/idpool strategy test --dir strategies

run_tests() { cargo test --locked --offline --no-fail-fast; }

if command -v unshare >/dev/null && unshare --net true 2>/dev/null; then
  log "cargo test (in a loopback-only network namespace)"
  export IDPOOL_TEST_NETNS=1
  unshare --net bash -c 'ip link set lo up && cargo test --locked --offline --no-fail-fast'
  log "scripts/demo.sh (in a loopback-only network namespace)"
  # The test build made the binaries; a plain `cargo build` would rebuild every
  # dependency with other features.
  IDPOOL_SKIP_BUILD=1 CARGO_NET_OFFLINE=true unshare --net bash -c 'ip link set lo up && ./scripts/demo.sh'
  log "scripts/fleet-demo.sh (in a loopback-only network namespace)"
  IDPOOL_SKIP_BUILD=1 CARGO_NET_OFFLINE=true unshare --net bash -c 'ip link set lo up && ./scripts/fleet-demo.sh'
  log "scripts/bench.sh --quick (a smoke run on the test build: the bench works; no timing is judged)"
  IDPOOL_SKIP_BUILD=1 IDPOOL_BENCH_SKIP_SETUP=1 unshare --net bash -c 'ip link set lo up && ./scripts/bench.sh --quick --profile debug'
else
  log "cargo test (WARNING: cannot create a network namespace here; relying on the tests' own loopback checks)"
  run_tests
  log "scripts/demo.sh"
  IDPOOL_SKIP_BUILD=1 ./scripts/demo.sh
  log "scripts/fleet-demo.sh"
  IDPOOL_SKIP_BUILD=1 ./scripts/fleet-demo.sh
  log "scripts/bench.sh --quick (a smoke run on the test build: the bench works; no timing is judged)"
  IDPOOL_SKIP_BUILD=1 IDPOOL_BENCH_SKIP_SETUP=1 ./scripts/bench.sh --quick --profile debug
fi
log "all tests passed, the demos ran, and the bench's smoke run passed"
