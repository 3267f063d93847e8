#!/usr/bin/env bash
# Install idpool as a systemd service; safe to run again (it never overwrites a
# config or keys file, and re-installs the binary and the unit).
#
#   sudo ./scripts/install.sh            build, install, enable and start
#   sudo ./scripts/install.sh --no-start install only
#
# Puts: /usr/local/bin/idpool, /etc/idpool/{idpool.toml,keys.toml,strategies,profiles},
# shell completions, man pages (idpool(1), idpool-<command>(1)), the docs in
# /usr/local/share/doc/idpool,
# /etc/systemd/system/idpool.service, user `idpool`, state in /var/lib/idpool,
# the audit log in /var/log/idpool/audit.log.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
[ "$(id -u)" -eq 0 ] || { echo "run as root (sudo $0)" >&2; exit 1; }
start=1
[ "${1:-}" = "--no-start" ] && start=0

ensure_packages
ensure_cargo
log "building (release)"
cargo build --locked --release --bin idpool
install -m 0755 target/release/idpool /usr/local/bin/idpool

id idpool >/dev/null 2>&1 || useradd --system --home-dir /var/lib/idpool --shell /usr/sbin/nologin idpool
install -d -m 0755 /etc/idpool
install_extras /usr/local/bin/idpool
log "installed completions (bash, zsh, fish), man pages (man idpool) and docs"
for d in strategies profiles; do
  if [ ! -d "/etc/idpool/$d" ]; then
    cp -r "$d" "/etc/idpool/$d"
    log "installed /etc/idpool/$d"
  fi
done
if [ ! -f /etc/idpool/idpool.toml ]; then
  cat >/etc/idpool/idpool.toml <<'TOML'
# idpool daemon config; every key is documented in idpool.example.toml
# (/usr/local/share/doc/idpool/docs/configuration.md has the reference).
[server]
listen = "127.0.0.1:8790"
keys_file = "/etc/idpool/keys.toml"
audit_log = "/var/log/idpool/audit.log"

[pool]
profiles = ["default", "en-gb"]
data_dir = "/var/lib/idpool"
strategies_dir = "/etc/idpool/strategies"
profiles_dir = "/etc/idpool/profiles"

[security]
allowed_hosts = []
TOML
  log "wrote /etc/idpool/idpool.toml"
fi
if [ ! -f /etc/idpool/keys.toml ]; then
  key=$(/usr/local/bin/idpool --config /etc/idpool/idpool.toml keys add admin --role admin)
  log "created /etc/idpool/keys.toml with an admin key (shown once; store it now):"
  echo "$key"
fi
chown root:idpool /etc/idpool/keys.toml
chmod 0640 /etc/idpool/keys.toml
install -m 0644 scripts/idpool.service /etc/systemd/system/idpool.service
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  if [ "$start" -eq 1 ]; then
    systemctl enable --now idpool
    systemctl --no-pager status idpool | head -5 || true
  fi
else
  log "systemd is not running here: the unit is installed but not started"
fi
log "done. Check it as the service's user: sudo -u idpool /usr/local/bin/idpool --config /etc/idpool/idpool.toml doctor"
