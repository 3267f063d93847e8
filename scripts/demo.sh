#!/usr/bin/env bash
# What idpool can do today, on the bundled testbed: a browser-fingerprint gate
# that blocks curl but lets a slot through, cookies that persist per identity, a
# JS challenge passed by a slot's own Chromium and then by its HTTP tier, and
# config validation. Installs what is missing and builds first.
#
# (The tools run in-process through `idpool call`; serving them over MCP from
# the daemon arrives with the MCP and daemon issues.)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ensure_packages
ensure_cargo

log "building"
cargo build --locked --bins
bin=target/debug

work=.idpool/demo
rm -rf "$work"
mkdir -p "$work"

log "starting the testbed shop (JA4 gate on) on 127.0.0.1:8443 / :8080"
"$bin/idpool-testbed" --https 127.0.0.1:8443 --http 127.0.0.1:8080 --state-dir "$work/testbed" --gate >"$work/testbed.out" 2>"$work/testbed.log" &
tb_pid=$!
trap 'kill "$tb_pid" 2>/dev/null; wait "$tb_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^ready' "$work/testbed.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^ready' "$work/testbed.out" || { cat "$work/testbed.log" >&2; echo "testbed did not start (ports 8443/8080 busy?)" >&2; exit 1; }
cat "$work/testbed.out"

cat >"$work/idpool.toml" <<'TOML'
[pool]
profiles = ["default", "firefox"]
data_dir = "data"
strategies_dir = "../../strategies"
profiles_dir = "../../profiles"

[security]
allow_private_networks = true      # the testbed is on 127.0.0.1
extra_root_certs = ["testbed/ca.pem"]
TOML
idpool() { "$bin/idpool" --config "$work/idpool.toml" "$@"; }
# Pretty-print chosen keys of a JSON document on stdin (raw JSON without python3).
show() {
  if command -v python3 >/dev/null; then
    python3 -c 'import json,sys; d=json.load(sys.stdin); [print(f"{k}: {json.dumps(d.get(k), indent=2)}") for k in json.loads(sys.argv[1])]' "$1"
  else
    cat; echo
  fi
}

log "idpool check-config"
idpool check-config

log "curl (a non-browser TLS fingerprint) asks for a product page"
curl -s -o /dev/null -w 'curl got HTTP %{http_code}\n' --cacert "$work/testbed/ca.pem" https://127.0.0.1:8443/product/B0DEMO1

log "slot 0 (chrome_149) asks for the same page"
idpool fetch https://127.0.0.1:8443/product/B0DEMO1 --slot 0 --out "$work/product.html"
grep -o '<h1 id="productTitle">[^<]*' "$work/product.html" | sed 's/.*>/product title: /'

log "slot 1 (firefox_151) asks for its reviews"
idpool fetch "https://127.0.0.1:8443/product-reviews/B0DEMO1?page=1" --slot 1 --out "$work/reviews.html"
echo "reviews on page 1: $(grep -c 'class="review"' "$work/reviews.html")"

log "a new process, same slot 0: the testbed's cookie comes back from the jar"
idpool fetch https://127.0.0.1:8443/whoami --slot 0 2>/dev/null | show '["ja4", "family", "cookie", "user_agent"]'

log "the shop turns its JS challenge on: slot 0's HTTP tier is challenged"
curl -s -o /dev/null -X POST -d '{"challenge": true}' http://127.0.0.1:8080/__control/mode
idpool fetch https://127.0.0.1:8443/product/B0DEMO2 --slot 0 --out "$work/challenged.html" || true

log "refresh-cookies: slot 0's own Chromium passes the challenge, its cookies go to the jar"
idpool refresh-cookies --strategy testshop --slot 0

log "slot 0's HTTP tier now gets through; slot 1 (another identity) is still challenged"
idpool fetch https://127.0.0.1:8443/product/B0DEMO2 --slot 0 --out "$work/after.html"
idpool fetch https://127.0.0.1:8443/product/B0DEMO2 --slot 1 --out "$work/other.html" || true

log "get_reviews on slot 1 (still challenged): the cascade goes to the browser once, then back to tier 1"
idpool call get_reviews --args '{"item": "B0TESTA1", "strategy": "testshop", "pages": 3, "slot": 1}' >"$work/reviews.json"
if command -v python3 >/dev/null; then
  python3 - "$work/reviews.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r['count']} reviews of {r['item']} ({r['strategy']}), has_more={r['has_more']}")
for p in r["pages"]:
    steps = ", ".join(f"tier {a['tier']} {a['outcome']}" for a in p["attempts"])
    print(f"  page {p['page']}: {p['count']} reviews from slot {p['slot']} tier {p['tier']}  [{steps}]")
first = r["reviews"][0]
print(f"  first: {first['rating']}/5 \"{first['title']}\" by {first['author']} on {first['date']}")
PY
else
  head -c 2000 "$work/reviews.json"; echo
fi

log "scrape (markdown) of a product page, first 400 characters"
idpool call scrape --args '{"url": "https://127.0.0.1:8443/product/B0TESTB2", "max_chars": 400}' | show '["content", "total_chars", "via"]'

log "what the testbed saw, per JA4 fingerprint"
curl -s http://127.0.0.1:8080/__control/stats | show '["by_ja4"]'
log "done; state is in $work"
