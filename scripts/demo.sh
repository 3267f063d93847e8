#!/usr/bin/env bash
# The main job on the bundled testbed, through MCP: start the testbed shop (a
# browser-fingerprint gate and a JS challenge) and `idpool serve` with
# scripts/demo.toml, then call `get_reviews` over MCP (Streamable HTTP) on an
# identity whose AJAX endpoint is blocked and who has never passed the
# challenge, so the cascade uses all three tiers; the shop binds the clearance
# to the browser that earned it, so later pages pass only because the slot's
# HTTP tier was calibrated against that browser. Prints the reviews, the tiers
# used, the slot health and the identity fidelity (both JA4s, the residual),
# and shuts everything down cleanly. Installs what
# is missing and builds first. Exits non-zero if any step does not hold.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ensure_packages
ensure_cargo

bin=target/debug
ensure_demo_bins "$bin"
work=.idpool/demo
config=scripts/demo.toml
rm -rf "$work"
mkdir -p "$work"

tb_pid="" d_pid=""
cleanup() {
  [ -n "$d_pid" ] && kill "$d_pid" 2>/dev/null && wait "$d_pid" 2>/dev/null || true
  [ -n "$tb_pid" ] && kill "$tb_pid" 2>/dev/null && wait "$tb_pid" 2>/dev/null || true
}
trap cleanup EXIT

log "starting the testbed shop (fingerprint gate on) on 127.0.0.1:8443 / :8080"
"$bin/idpool-testbed" --https 127.0.0.1:8443 --http 127.0.0.1:8080 --state-dir "$work/testbed" --gate \
  >"$work/testbed.out" 2>"$work/testbed.log" &
tb_pid=$!
for _ in $(seq 100); do grep -q '^ready' "$work/testbed.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^ready' "$work/testbed.out" || { cat "$work/testbed.log" >&2; echo "testbed did not start (ports 8443/8080 busy?)" >&2; exit 1; }

idpool() { "$bin/idpool" --config "$config" "$@"; }
log "idpool check-config"
idpool check-config

log "idpool serve (MCP at http://127.0.0.1:8790/mcp, legacy SSE at /sse); log in $work/daemon.log"
"$bin/idpool" --config "$config" serve 2>"$work/daemon.log" &
d_pid=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:8790/healthz >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf http://127.0.0.1:8790/healthz >/dev/null || { cat "$work/daemon.log" >&2; echo "the daemon did not start (port 8790 busy?)" >&2; exit 1; }

log "curl (not a browser) is refused by the shop's fingerprint gate"
curl -s -o /dev/null -w 'curl got HTTP %{http_code}\n' --cacert "$work/testbed/ca.pem" https://127.0.0.1:8443/product/B0DEMO1

log "the shop turns on its JS challenge (clearance bound to the browser that earned it), and blocks the next AJAX request (slot 0's)"
curl -sf -o /dev/null -X POST -d '{"challenge": true, "consistency": true}' http://127.0.0.1:8080/__control/mode
curl -sf -o /dev/null -X POST \
  -d '{"fault": {"kind": "error", "status": 403, "path_prefix": "/ajax/reviews", "remaining": 1}}' \
  http://127.0.0.1:8080/__control/mode

log "MCP tools/call get_reviews {item: B0TESTA1, pages: 3, slot: 0} (progress below)"
idpool call get_reviews --args '{"item": "B0TESTA1", "strategy": "testshop", "pages": 3, "slot": 0}' \
  >"$work/reviews.json"

python3 - "$work/reviews.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r['count']} reviews of {r['item']} ({r['strategy']}), has_more={r['has_more']}")
used = set()
for p in r["pages"]:
    steps = ", ".join(f"tier {a['tier']} {a['outcome']}" for a in p["attempts"])
    used |= {a["tier"] for a in p["attempts"] if a["outcome"] != "skipped"}
    print(f"  page {p['page']}: {p['count']} reviews from slot {p['slot']} tier {p['tier']}   [{steps}]")
for rv in r["reviews"][:3]:
    print(f"  {rv['rating']}/5 \"{rv['title']}\" by {rv['author']} on {rv['date']} (helpful: {rv['helpful']})")
print(f"  ... {r['count'] - 3} more")
if used != {1, 2, 3}:
    sys.exit(f"expected the cascade to use tiers 1, 2 and 3, it used {sorted(used)}")
first = [(a["tier"], a["outcome"]) for a in r["pages"][0]["attempts"]]
if first != [(1, "tier_block"), (2, "challenge"), (3, "ok")]:
    sys.exit(f"page 1 should go tier 1 (blocked) -> tier 2 (challenged) -> tier 3 in one pass, it went {first}")
print("tiers used: 1 (AJAX, blocked), 2 (HTML, challenged), 3 (browser, passed); later pages over HTTP with the browser's cookie,")
print("accepted because slot 0's HTTP tier was calibrated against its Chromium (the shop binds the clearance to header order, HTTP/2 and JA4)")
PY

log "MCP tools/call pool_status: slot health"
idpool call pool_status >"$work/status.json"
python3 - "$work/status.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"{'slot':<5}{'profile':<9}{'testshop breaker':<18}{'tiers blocked':<15}{'browser':<22}{'cookies':<8}requests")
for x in s["slots"]:
    b = x["breakers"]["testshop"]
    tiers = ",".join(sorted(b["tiers_blocked"])) or "-"
    br = x["browser"]
    browser = f"pid {br['pid']} ops {br['total_ops']}" if br["running"] else "not running"
    print(f"{x['slot']:<5}{x['profile']:<9}{b['state'] + ' (' + str(b['failures']) + ')':<18}{tiers:<15}{browser:<22}{x['cookies']['count']:<8}{x['requests']}")
print("identity fidelity (HTTP tier vs the slot's own Chromium):")
for x in s["slots"]:
    c = x["calibration"]
    if c["state"] != "calibrated":
        print(f"  slot {x['slot']}: {c['state']}")
        continue
    eq = lambda v: "equal" if v else "DIFFER"
    print(f"  slot {x['slot']}: {c['chromium']}")
    print(f"    JA4 browser {c['browser_ja4']}  http {c['http_ja4']} (a {eq(c['ja4_a_equal'])}, b {eq(c['ja4_b_equal'])})")
    print(f"    HTTP/2 {eq(c['h2_equal'])}, navigation headers {eq(c['headers_equal'])}, XHR headers {eq(c['xhr_headers_equal'])}")
    print(f"    residual ({len(c['residual'])}):")
    for d in c["residual"]:
        print(f"      {d}")
if s["slots"][0]["calibration"]["state"] != "calibrated":
    sys.exit("slot 0 should be calibrated after its browser launched")
PY

browser_pids=$(python3 -c 'import json,sys; print(" ".join(str(x["browser"]["pid"]) for x in json.load(open(sys.argv[1]))["slots"] if x["browser"]["pid"]))' "$work/status.json")
[ -n "$browser_pids" ] || { echo "slot 0's browser should be running after tier 3" >&2; exit 1; }

log "stopping the daemon (SIGTERM): browsers closed and reaped, jars saved"
kill -TERM "$d_pid"
status=0
wait "$d_pid" || status=$?
d_pid=""
[ "$status" -eq 0 ] || { tail -20 "$work/daemon.log" >&2; echo "the daemon exited with $status" >&2; exit 1; }
for pid in $browser_pids; do
  if kill -0 "$pid" 2>/dev/null; then echo "Chromium pid $pid outlived the daemon" >&2; exit 1; fi
done
echo "daemon exited 0; Chromium ${browser_pids:-(none)} ended; $(wc -l <"$work/data/audit.log") calls in the audit log"
log "done; state is in $work"
