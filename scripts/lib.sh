# Shared by scripts/test.sh, scripts/demo.sh, scripts/fleet-demo.sh and scripts/bench.sh. Source it; do not run it.

log() { printf '\n==> [%s] %s\n' "$(date +%T)" "$*" >&2; }

# Install the Debian packages idpool needs when any is missing:
# cmake + clang/libclang build BoringSSL (wreq); chromium is the browser tier;
# curl is the "non-browser client" of the JA4 test; iproute2 + util-linux give the
# loopback-only test namespace; python3 formats the demo's output; libnss3-tools
# (certutil) writes each slot's browser trust store for security.extra_root_certs.
# xvfb is the virtual display of browser.display = "xvfb" (headful Chromium).
ensure_packages() {
  ensure_debs cmake clang libclang-dev chromium curl iproute2 util-linux ca-certificates python3 libnss3-tools \
    redis-server redis-tools xvfb
  # Every slot's persona draws its fonts from these (src/identity/persona/population.rs),
  # and speaks its locale with Chromium's language packs.
  ensure_debs chromium-l10n fonts-dejavu-core fonts-dejavu-extra fonts-liberation fonts-liberation2 \
    fonts-urw-base35 fonts-noto-color-emoji fonts-noto-core fonts-noto-mono fonts-cantarell \
    fonts-crosextra-carlito fonts-crosextra-caladea fonts-freefont-ttf fonts-lato fonts-croscore \
    fonts-open-sans fonts-roboto-unhinted fonts-hack
}

# Install the Debian packages named when any is missing (apt-get update first).
ensure_debs() {
  local need=() pkg sudo=""
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  [ "${#need[@]}" -eq 0 ] && return 0
  log "installing: ${need[*]}"
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${need[@]}"
}

# The daemon and the testbed in DIR (target/debug), built unless
# IDPOOL_SKIP_BUILD is set and both are there (the test build made them).
ensure_demo_bins() {
  if [ -n "${IDPOOL_SKIP_BUILD:-}" ] && [ -x "$1/idpool" ] && [ -x "$1/idpool-testbed" ]; then
    log "using the binaries already built in $1"
  else
    log "building"
    cargo build --locked --workspace --bins
  fi
}

ensure_cargo() {
  command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
}

# Node.js + the official MCP TypeScript SDK and conformance suite (tests/mcp-js),
# pinned by its package-lock.json. Node 20.18+ is needed (undici 7).
# A venv of its own for one pinned PyPI package: ensure_venv DIR PACKAGE==VERSION WHAT.
# Made again when the pin changes (the stamp file holds it).
ensure_venv() {
  local venv=$1 pin=$2 what=$3 stamp=$1/.idpool-pin
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$pin" ]; then
    command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null \
      || ensure_debs python3-venv
    log "python venv: $pin ($what)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "$pin"
    echo "$pin" >"$stamp"
  fi
}

# The official MCP Python SDK for the suite's round trips (tests/mcp-py).
MCP_PY_VERSION=2.3.0
ensure_py_mcp() { ensure_venv .idpool/mcp-py-venv "mcp==$MCP_PY_VERSION" tests/mcp-py; }

# kubernetes-validate (Kubernetes' own schemas, offline) for tests/offline/deploy.rs.
KUBE_VALIDATE_VERSION=1.37.0
ensure_py_kube() { ensure_venv .idpool/kube-venv "kubernetes-validate==$KUBE_VALIDATE_VERSION" tests/offline/deploy.rs; }

ensure_node_deps() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    log "installing: nodejs npm"
    $sudo apt-get update
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends nodejs npm
  fi
  node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=18)?0:1)' \
    || { echo "Node.js $(node --version) is too old: the MCP test clients need 20.18 or newer" >&2; exit 1; }
  # tests/mcp-js: the MCP SDK and conformance suite; tests/detectors: the
  # published bot detector the testbed serves (@fingerprintjs/botd).
  local dir stamp
  for dir in tests/mcp-js tests/detectors; do
    stamp="$dir/node_modules/.idpool-lock"
    if [ ! -f "$stamp" ] || ! cmp -s "$dir/package-lock.json" "$stamp"; then
      log "npm ci ($dir)"
      npm ci --prefix "$dir" --no-audit --no-fund
      cp "$dir/package-lock.json" "$stamp"
    fi
  done
}

# Shell completions, the man pages and the docs for the idpool binary BIN,
# under ROOT (/ for a real install); each run writes the same files again.
install_extras() {
  local bin="$1" root="${2:-}" man
  install -d "$root/usr/share/bash-completion/completions" "$root/usr/local/share/zsh/site-functions" \
    "$root/usr/share/fish/vendor_completions.d" "$root/usr/local/share/man/man1" "$root/usr/local/share/doc/idpool/docs"
  "$bin" completions bash >"$root/usr/share/bash-completion/completions/idpool"
  "$bin" completions zsh >"$root/usr/local/share/zsh/site-functions/_idpool"
  "$bin" completions fish >"$root/usr/share/fish/vendor_completions.d/idpool.fish"
  man=$(mktemp -d)
  "$bin" manpage --dir "$man"
  install -m 0644 "$man"/*.1 "$root/usr/local/share/man/man1/"
  rm -rf "$man"
  install -m 0644 README.md "$root/usr/local/share/doc/idpool/README.md"
  install -m 0644 docs/*.md "$root/usr/local/share/doc/idpool/docs/"
  command -v mandb >/dev/null && [ -z "$root" ] && mandb -q >/dev/null 2>&1 || true
}
