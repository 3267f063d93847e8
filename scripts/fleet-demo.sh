#!/usr/bin/env bash
# A fleet on one machine: a real redis-server (Debian's package) and three
# idpool daemons on loopback, sharing one pool against the bundled testbed.
# Agents call all three; daemon a is SIGKILLed; its identities are adopted
# by the others (same cookies, same proxy session); fleet health is printed
# before and after. Installs what is missing and builds first. Exits
# non-zero if any step does not hold.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ensure_packages
ensure_cargo

bin=target/debug
ensure_demo_bins "$bin"
work=$PWD/.idpool/fleet-demo
rm -rf "$work"
mkdir -p "$work"
ttl=5

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true
  done
  # Chromium a SIGKILLed daemon started (by the PIDs it wrote down).
  for f in "$work"/*/data/slots/*/chromium.pid; do
    [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null || true
  done
}
trap cleanup EXIT

# Redis with a password, handed to the daemons in IDPOOL_REDIS_URL (never in
# a config file or on a command line); redis-server reads it from its own
# config file (0600).
umask 077
password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
printf 'requirepass %s\n' "$password" >"$work/redis.conf"
umask 022
log "redis-server on 127.0.0.1:6390 with a password (no persistence: the fleet's state is in memory)"
redis-server "$work/redis.conf" --bind 127.0.0.1 --port 6390 --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
rping() { REDISCLI_AUTH=$password redis-cli -p 6390 ping 2>/dev/null; }
for _ in $(seq 100); do rping | grep -q PONG && break; sleep 0.1; done
rping | grep -q PONG || { cat "$work/redis.log" >&2; echo "redis-server did not start (port 6390 busy?)" >&2; exit 1; }
export IDPOOL_REDIS_URL="redis://:$password@127.0.0.1:6390/"

log "the testbed shop on 127.0.0.1:8443 / :8080"
"$bin/idpool-testbed" --https 127.0.0.1:8443 --http 127.0.0.1:8080 --state-dir "$work/testbed" \
  >"$work/testbed.out" 2>"$work/testbed.log" &
pids+=($!)
for _ in $(seq 100); do grep -q '^ready' "$work/testbed.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^ready' "$work/testbed.out" || { cat "$work/testbed.log" >&2; echo "testbed did not start (ports 8443/8080 busy?)" >&2; exit 1; }

# The key daemons present to each other when they forward a call.
umask 077
head -c 24 /dev/urandom | base64 >"$work/cluster.key"
umask 022

# node PORT CDP_BASE: a daemon's config, two slots of its own, two spares.
node_config() {
  local name=$1 port=$2 base=$3
  mkdir -p "$work/$name"
  cat >"$work/$name/idpool.toml" <<EOF
[server]
listen = "127.0.0.1:$port"
keys_file = "keys.toml"
anonymous_role = "operator"

[pool]
size = 2
base_port = $base
data_dir = "data"
strategies_dir = "$PWD/strategies"
profiles_dir = "$PWD/profiles"

[security]
allow_private_networks = true
extra_root_certs = ["$work/testbed/ca.pem"]

[cluster]
# redis_url comes from IDPOOL_REDIS_URL (it carries the password)
node = "$name"
key_file = "$work/cluster.key"
lease_ttl_secs = $ttl
adopt = true
spare_slots = 2
EOF
}

declare -A port=([a]=8791 [b]=8792 [c]=8793) dpid=()
base=19400
for n in a b c; do
  node_config "$n" "${port[$n]}" "$base"
  base=$((base + 10))
  "$bin/idpool" --config "$work/$n/idpool.toml" serve 2>"$work/$n/daemon.log" &
  dpid[$n]=$!
  pids+=($!)
done
for n in a b c; do
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:${port[$n]}/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -sf "http://127.0.0.1:${port[$n]}/readyz" || { cat "$work/$n/daemon.log" >&2; echo "daemon $n did not start" >&2; exit 1; }
done

call() { # DAEMON TOOL ARGS
  curl -sf -X POST -H 'content-type: application/json' -d "$3" "http://127.0.0.1:${port[$1]}/api/v1/tools/$2"
}

log "agents: three calls on each daemon at once"
for n in a b c; do
  for k in 1 2 3; do
    call "$n" get_reviews "{\"item\": \"B0FLEET$k\", \"strategy\": \"testshop\"}" >"$work/$n-$k.json" &
  done
done
wait_calls() { local n k; for n in a b c; do for k in 1 2 3; do [ -s "$work/$n-$k.json" ] || return 1; done; done; }
for _ in $(seq 300); do wait_calls && break; sleep 0.1; done
wait_calls || { echo "some agent calls did not finish" >&2; exit 1; }
python3 - "$work" <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/[abc]-*.json")):
    r = json.load(open(f))
    print(f"  {f.rsplit('/', 1)[1][:-5]}: {r['count']} reviews of {r['item']} from slot {r.get('slot')}")
PY

fleet() { "$bin/idpool" --config "$work/$1/idpool.toml" slots --fleet; }
log "fleet health, as daemon c reads it from Redis"
fleet c

session_of() { # DAEMON SLOT: the proxy session and shop cookie of a slot
  curl -sf -X POST -d '{}' "http://127.0.0.1:${port[$1]}/api/v1/tools/pool_status" \
    | python3 -c 'import json,sys; s=json.load(sys.stdin)["slots"]['"$2"']; print(s["identity"]["session"], s["cookies"]["count"])'
}
# Every call wakes its daemon's heartbeat (coalesced to a few a second):
# the fleet has each identity's cookies and site state a moment later.
sleep 1
before=$(session_of a 0)
log "SIGKILL daemon a (its identities a/0 and a/1: session and cookies $before for a/0)"
kill -KILL "${dpid[a]}"
wait "${dpid[a]}" 2>/dev/null || true
t0=$(date +%s)
adopted=""
for _ in $(seq $(((ttl + 5) * 10))); do
  out=$(fleet b 2>/dev/null || true)
  if echo "$out" | grep -Eq 'a/0 +held by [bc]' && echo "$out" | grep -Eq 'a/1 +held by [bc]'; then
    adopted=yes
    break
  fi
  sleep 0.1
done
[ -n "$adopted" ] || { fleet b; echo "a's identities were not adopted within $((ttl + 5)) s" >&2; exit 1; }
echo "a's identities adopted $(($(date +%s) - t0)) s after the kill (lease TTL $ttl s)"

log "fleet health after the kill"
fleet b

log "the adopted identity keeps its proxy session and cookies"
python3 - "${port[b]}" "${port[c]}" "$before" <<'PY'
import json, sys, urllib.request
want_session = sys.argv[3].split()[0]
for port in sys.argv[1:3]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/tools/pool_status", data=b"{}", method="POST")
    for s in json.load(urllib.request.urlopen(req))["slots"]:
        if s.get("fleet_id") == "a/0" and s.get("held"):
            print(f"  a/0 now in slot {s['slot']} of 127.0.0.1:{port}: session {s['identity']['session']}, {s['cookies']['count']} cookies")
            if s["identity"]["session"] != want_session:
                sys.exit(f"a/0 came with another proxy session: {s['identity']['session']} != {want_session}")
            sys.exit(0)
sys.exit("no daemon holds a/0")
PY

log "an agent's call on b still works"
call b get_reviews '{"item": "B0AFTER", "strategy": "testshop"}' \
  | python3 -c 'import json,sys; r=json.load(sys.stdin); print("  %d reviews of %s" % (r["count"], r["item"]))'

log "stopping b and c (SIGTERM), redis-server and the testbed"
for n in b c; do
  kill -TERM "${dpid[$n]}"
  status=0
  wait "${dpid[$n]}" || status=$?
  [ "$status" -eq 0 ] || { tail -20 "$work/$n/daemon.log" >&2; echo "daemon $n exited with $status" >&2; exit 1; }
done
if grep -rqF "$password" "$work"/*/daemon.log "$work"/*/idpool.toml; then
  echo "the Redis password is in a log or config" >&2; exit 1
fi
log "done; state is in $work (the Redis password is in no log)"
