#!/usr/bin/env bash
# Install idpool as a systemd service; safe to run again (it never overwrites a
# config or keys file, and re-installs the binary and the unit).
#
#   sudo ./scripts/install.sh            build, install, enable and start
#   sudo ./scripts/install.sh --no-start install only
#
#   --root DIR   install under DIR instead of / (DIR/usr/local/bin, DIR/etc,
#                DIR/var); the config names those paths; apt and systemd are
#                left alone (a trial install, or tests/offline/install.rs)
#   --bin PATH   install this idpool binary instead of building one
#   --user NAME  the service's user (default idpool; made when missing)
#
# Puts: /usr/local/bin/idpool, /etc/idpool/{idpool.toml,keys.toml,strategies,profiles},
# shell completions, man pages (idpool(1), idpool-<command>(1)), the docs in
# /usr/local/share/doc/idpool,
# /etc/systemd/system/idpool.service, user `idpool`, state in /var/lib/idpool,
# the audit log in /var/log/idpool/audit.log. The state and log folders are
# made here with the unit's owner and modes, so that a host without systemd
# (a container, WSL) can run the daemon by hand; the script says how.
set -euo pipefail

usage() {
  echo "usage: $0 [--no-start] [--root DIR] [--bin PATH] [--user NAME]${1:+ ($1)}" >&2
  exit 64
}
start=1 root="" bin="" user=idpool
while [ $# -gt 0 ]; do
  case "$1" in
    --no-start) start=0 ;;
    --root | --bin | --user)
      [ -n "${2:-}" ] || usage "$1 needs a value"
      case "$1" in
        --root) root=$(realpath -m "$2") ;;
        --bin) bin=$(realpath -m "$2") ;;
        --user) user=$2 ;;
      esac
      shift
      ;;
    *) usage "unknown option $1" ;;
  esac
  shift
done
[ "$root" = / ] && root=""
# The root is written into the config (TOML strings) and the unit (sed).
case "$root" in *[!A-Za-z0-9/._-]*) usage "--root: letters, digits and / . _ - only" ;; esac
[ -z "$bin" ] || [ -x "$bin" ] || usage "--bin: $bin is not an executable file"

cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
[ "$(id -u)" -eq 0 ] || { echo "run as root (sudo $0)" >&2; exit 1; }
bindir=$root/usr/local/bin etc=$root/etc/idpool state=$root/var/lib/idpool logs=$root/var/log/idpool

# apt installs into /: a --root install uses the machine's packages as they are.
[ -n "$root" ] || ensure_packages
if [ -z "$bin" ]; then
  ensure_cargo
  log "building (release)"
  cargo build --locked --release --bin idpool
  bin=target/release/idpool
fi
mkdir -p "$bindir"
install -m 0755 "$bin" "$bindir/idpool"

id "$user" >/dev/null 2>&1 || useradd --system --home-dir "$state" --shell /usr/sbin/nologin "$user"
group=$(id -gn "$user")
install -d -m 0755 "$etc"
install_extras "$bindir/idpool" "$root"
log "installed completions (bash, zsh, fish), man pages (man idpool) and docs"
for d in strategies profiles; do
  if [ ! -d "$etc/$d" ]; then
    cp -r "$d" "$etc/$d"
    log "installed $etc/$d"
  fi
done
if [ ! -f "$etc/idpool.toml" ]; then
  cat >"$etc/idpool.toml" <<TOML
# idpool daemon config; every key is documented in idpool.example.toml
# (/usr/local/share/doc/idpool/docs/configuration.md has the reference).
[server]
listen = "127.0.0.1:8790"
keys_file = "$etc/keys.toml"
audit_log = "$logs/audit.log"

[pool]
profiles = ["default", "en-gb"]
data_dir = "$state"
strategies_dir = "$etc/strategies"
profiles_dir = "$etc/profiles"

[security]
allowed_hosts = []
TOML
  log "wrote $etc/idpool.toml"
fi
if [ ! -f "$etc/keys.toml" ]; then
  key=$("$bindir/idpool" --config "$etc/idpool.toml" keys add admin --role admin)
  log "created $etc/keys.toml with an admin key (shown once; store it now):"
  echo "$key"
fi
chown "root:$group" "$etc/keys.toml"
chmod 0640 "$etc/keys.toml"

# The folders the unit's StateDirectory= and LogsDirectory= make when systemd
# starts it, with its modes (systemd's default is 0755): made here too, since
# without systemd nothing else would, and the daemon's user cannot make them.
unit_mode() { sed -n "s/^$1=//p" scripts/idpool.service | tail -n 1; }
state_mode=$(unit_mode StateDirectoryMode) logs_mode=$(unit_mode LogsDirectoryMode)
install -d -o "$user" -g "$group" -m "${state_mode:-0755}" "$state"
install -d -o "$user" -g "$group" -m "${logs_mode:-0755}" "$logs"
log "$state and $logs belong to $user (modes ${state_mode:-0755}, ${logs_mode:-0755})"

# The unit names the installed paths and the service's user.
mkdir -p "$root/etc/systemd/system"
sed -e "s#/usr/local/bin/idpool#$bindir/idpool#g" -e "s#/etc/idpool#$etc#g" \
  -e "s#/var/lib/idpool#$state#g" -e "s#/var/log/idpool#$logs#g" \
  -e "s#^User=idpool\$#User=$user#" -e "s#^Group=idpool\$#Group=$group#" \
  scripts/idpool.service >"$root/etc/systemd/system/idpool.service.new"
chmod 0644 "$root/etc/systemd/system/idpool.service.new"
mv "$root/etc/systemd/system/idpool.service.new" "$root/etc/systemd/system/idpool.service"
as_user="runuser -u $user -- $bindir/idpool --config $etc/idpool.toml"
if [ -z "$root" ] && command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  if [ "$start" -eq 1 ]; then
    systemctl enable --now idpool
    systemctl --no-pager status idpool | head -5 || true
  fi
else
  if [ -n "$root" ]; then
    log "installed under $root: systemd is left alone"
  else
    log "systemd is not running here: the unit is installed but not started"
  fi
  log "start the daemon by hand, as the service's user (in the foreground, logging to stderr; SIGHUP reloads, SIGTERM stops): $as_user serve"
fi
log "done. Check it as the service's user: $as_user doctor"
