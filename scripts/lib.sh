# Shared by scripts/test.sh and scripts/demo.sh. Source it; do not run it.

log() { printf '\n==> %s\n' "$*" >&2; }

# Install the Debian packages idpool needs when any is missing:
# cmake + clang/libclang build BoringSSL (wreq); chromium is the browser tier;
# curl is the "non-browser client" of the JA4 test; iproute2 + util-linux give the
# loopback-only test namespace.
ensure_packages() {
  local need=() pkg sudo=""
  for pkg in cmake clang libclang-dev chromium curl iproute2 util-linux ca-certificates; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  [ "${#need[@]}" -eq 0 ] && return 0
  log "installing: ${need[*]}"
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${need[@]}"
}

ensure_cargo() {
  command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
}
