#!/usr/bin/env python3
"""scripts/bench.sh's driver: starts its own targets on loopback (nginx serving
fixed review JSON and HTML over HTTPS from a test CA, and over plain HTTP for
the browser rows), idpool daemons (1 and 8 slots), then runs every row in
interleaved rounds (A B C ... A B C ...) and writes a Markdown report and the
raw JSON under bench/results/.

Every process it starts is ended and reaped by PID. Nothing leaves loopback.
"""

import argparse
import json
import os
import re
import pathlib
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
ITEM = "B0BENCH"
HZ = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- fixtures ---------------------------------------------------------------

WORDS = (
    "solid build quality battery lasts longer than expected the screen is bright "
    "and sharp but the speaker could be louder shipping was fast packaging fine "
    "would buy again after a month of daily use it still works like new"
).split()


def review(i):
    words = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(150)]
    return {
        "id": f"R{i:05d}",
        "author": f"Customer {i}",
        "rating": 1 + (i * 3) % 5,
        "title": " ".join(words[:6]).capitalize(),
        "body": " ".join(words).capitalize() + ".",
        "date": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}",
        "verified": i % 3 != 0,
        "helpful": (i * 13) % 97,
    }


def write_fixtures(root):
    reviews = [review(i) for i in range(1, 11)]
    (root / "ajax/reviews").mkdir(parents=True, exist_ok=True)
    (root / "product-reviews").mkdir(parents=True, exist_ok=True)
    body = {"item": ITEM, "page": 1, "total": 123, "has_more": True, "reviews": reviews}
    (root / f"ajax/reviews/{ITEM}.json").write_text(json.dumps(body, indent=1))
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>Customer reviews: {ITEM}</title>",
        "<style>body{font-family:sans-serif;max-width:60em;margin:auto}"
        ".review{border-bottom:1px solid #ddd;padding:1em 0}</style></head><body>",
        "<header><nav><a href=/>Home</a> &gt; <a href=/c/1>Electronics</a></nav></header>",
        f"<main><h1>Reviews of {ITEM}</h1><div id=reviews>",
    ]
    for r in reviews:
        parts.append(
            f'<div class="review" data-review-id="{r["id"]}">'
            f'<span class="review-author">{r["author"]}</span>'
            f'<i class="review-rating">{r["rating"]}.0 out of 5 stars</i>'
            f'<a class="review-title" href="/review/{r["id"]}">{r["title"]}</a>'
            f'<span class="review-date">Reviewed on {r["date"]}</span>'
            + ('<span class="review-verified">Verified Purchase</span>' if r["verified"] else "")
            + f'<div class="review-body"><p>{r["body"]}</p></div>'
            f'<span class="review-helpful">{r["helpful"]} people found this helpful</span>'
            "</div>"
        )
    parts.append('</div><ul class="a-pagination"><li class="a-last">')
    parts.append(f'<a href="/product-reviews/{ITEM}.html?page=2">Next</a></li></ul></main>')
    parts.append("<footer>" + "<p>Conditions of use. Privacy notice.</p>" * 20 + "</footer>")
    parts.append("</body></html>")
    (root / f"product-reviews/{ITEM}.html").write_text("\n".join(parts))


FIELDS_HTML = """
id = { attr = "data-review-id" }
author = { css = ".review-author" }
rating = { css = ".review-rating", number = true }
title = { css = ".review-title" }
body = { css = ".review-body" }
date = { css = ".review-date", regex = "Reviewed on (\\\\S+)" }
verified = { css = ".review-verified", exists = true }
helpful = { css = ".review-helpful", number = true }
"""

STRATEGY = """# Written by bench/run.py: the bench target (nginx on loopback).
name = "bench"
hosts = ["127.0.0.1"]
base_url = "https://127.0.0.1:{tls}"

[politeness]
min_interval_ms = 0
max_in_flight = 1024
global_max_in_flight = 4096

[block]
status = [401, 403]
body = ["validateCaptcha"]

[challenge]
selector = "#challenge-form"

[empty]
selector = ".no-reviews"

[operations.reviews]
description = "Reviews: tier 1 JSON, tier 2 HTML"
[operations.reviews.params.item]
type = "string"
required = true
[operations.reviews.params.page]
type = "integer"
default = 1
minimum = 1
[operations.reviews.extract]
items = "div.review"
empty = ".no-reviews"
next = "li.a-last a"
[operations.reviews.extract.fields]
{fields}
[operations.reviews.tier1]
url = "{{base_url}}/ajax/reviews/{{item}}.json"
format = "json"
[operations.reviews.tier1.extract]
items = "/reviews"
empty = "/total"
next = "/has_more"
[operations.reviews.tier1.extract.fields]
id = {{ pointer = "/id" }}
author = {{ pointer = "/author" }}
rating = {{ pointer = "/rating" }}
title = {{ pointer = "/title" }}
body = {{ pointer = "/body" }}
date = {{ pointer = "/date" }}
verified = {{ pointer = "/verified" }}
helpful = {{ pointer = "/helpful" }}
[operations.reviews.tier2]
url = "{{base_url}}/product-reviews/{{item}}.html"

[operations.page]
description = "The review page, tier 2 only"
[operations.page.params.item]
type = "string"
required = true
[operations.page.extract]
items = "div.review"
empty = ".no-reviews"
next = "li.a-last a"
[operations.page.extract.fields]
{fields}
[operations.page.tier2]
url = "{{base_url}}/product-reviews/{{item}}.html"
"""

DAEMON = """# Written by bench/run.py.
[server]
listen = "127.0.0.1:{port}"
keys_file = "{work}/keys-none.toml"
anonymous_role = "operator"

[pool]
size = {slots}
profile = "default"
base_port = {base_port}
data_dir = "{data}"
strategies_dir = "{work}/strategies"
profiles_dir = "{root}/profiles"

[security]
allow_private_networks = true
extra_root_certs = ["{work}/tls/ca.pem"]
"""

NGINX = """# Written by bench/run.py.
{user}
worker_processes 1;
error_log {work}/nginx/error.log warn;
pid {work}/nginx/nginx.pid;
events {{ worker_connections 4096; }}
http {{
  include /etc/nginx/mime.types;
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 300s;
  client_body_temp_path {work}/nginx/tmp;
  proxy_temp_path {work}/nginx/tmp;
  fastcgi_temp_path {work}/nginx/tmp;
  uwsgi_temp_path {work}/nginx/tmp;
  scgi_temp_path {work}/nginx/tmp;
  server {{
    listen 127.0.0.1:{tls} ssl http2;
    listen 127.0.0.1:{plain};
    ssl_certificate {work}/tls/server.pem;
    ssl_certificate_key {work}/tls/server.key;
    root {work}/site;
  }}
}}
"""


def make_tls(d):
    d.mkdir(parents=True, exist_ok=True)
    run = lambda *a: subprocess.run(a, cwd=d, check=True, capture_output=True)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "30",
        "-subj", "/CN=idpool bench CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    (d / "ext.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "extendedKeyUsage=serverAuth\n")
    run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "30", "-extfile", "ext.cnf")


# --- processes ---------------------------------------------------------------

class Proc:
    """A process we started, in its own process group; ended and reaped by PID."""

    def __init__(self, name, argv, log_path, env=None):
        self.name = name
        # A daemon's data dir: its Chromiums (each in a process group of its
        # own) are ended with it when it has to be killed.
        self.data = None
        self.log = open(log_path, "ab")
        self.p = subprocess.Popen(argv, stdout=self.log, stderr=self.log, env=env,
                                  start_new_session=True)
        self.pid = self.p.pid

    def stop(self, grace=30):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                log(f"{self.name} (pid {self.pid}) ignored SIGTERM for {grace}s: killing its group")
                os.killpg(self.pid, signal.SIGKILL)
                self.p.wait()
                self.end_browsers()
        self.log.close()

    def end_browsers(self):
        """End, by PID, every process whose arguments name a folder of this
        daemon's data dir (its slots' Chromiums and their crashpad handlers,
        which a killed daemon leaves behind)."""
        if self.data is None:
            return
        mark = str(self.data) + "/"
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    args = f.read().decode(errors="replace")
            except OSError:
                continue
            if mark in args:
                log(f"{self.name}: ending its left-over process {entry}")
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass


def wait_http(url, secs=60):
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer in {secs}s")


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def children_tree(pid):
    """Every descendant of pid (by PPid)."""
    parents = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in parents.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def pss_kb(pids):
    total = 0
    for p in pids:
        try:
            for line in open(f"/proc/{p}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def cpu_busy_fraction(secs=0.5):
    def snap():
        f = open("/proc/stat").readline().split()[1:]
        v = list(map(int, f))
        idle = v[3] + v[4]
        return sum(v), idle

    t0, i0 = snap()
    time.sleep(secs)
    t1, i1 = snap()
    return 1 - (i1 - i0) / max(1, t1 - t0)


def wait_idle(limit=0.10, patience=20):
    """Wait until the machine is idle (busy < limit); return the last reading."""
    deadline = time.time() + patience
    while True:
        busy = cpu_busy_fraction()
        if busy < limit or time.time() > deadline:
            if busy >= limit:
                log(f"machine still {busy:.0%} busy after {patience}s; measuring anyway")
            return busy


# --- the bench ---------------------------------------------------------------

def paired(rows, round_no):
    """The rows in order, each `old_` row (the --versus build's) right next to
    its new one, the pair's order swapped every round: a before/after ratio is
    not biased by which build ran first or by how warm the machine was."""
    old = {name: (name, fn) for name, fn in rows if name.startswith("old_")}
    out = []
    for name, fn in rows:
        if name.startswith("old_"):
            continue
        pair = [(name, fn)]
        if "old_" + name in old:
            pair.append(old["old_" + name])
            if round_no % 2 == 1:
                pair.reverse()
        out += pair
    return out


class Bench:
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.secs = 2.0 if self.quick else args.seconds
        self.rounds = 1 if self.quick else args.rounds
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.out = ROOT / "bench/results" / stamp
        self.out.mkdir(parents=True, exist_ok=True)
        self.work = ROOT / ".idpool/bench"
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        self.bin = pathlib.Path(args.target_dir) / args.profile
        # An older build (its `idpool` and `examples/bench`) measured in the
        # same rounds, for a before/after in one run.
        self.old = pathlib.Path(args.versus) if args.versus else None
        self.procs = []
        self.samples = {}  # row -> list of results
        self.tls, self.plain = free_port(), free_port()

    # processes
    def start(self, name, argv, env=None):
        p = Proc(name, argv, self.work / f"{name}.log", env)
        self.procs.append(p)
        return p

    def stop(self, p):
        p.stop()
        self.procs.remove(p)

    def stop_all(self):
        for p in reversed(list(self.procs)):
            p.stop()
        self.procs.clear()

    def setup(self):
        write_fixtures(self.work / "site")
        make_tls(self.work / "tls")
        (self.work / "nginx/tmp").mkdir(parents=True)
        (self.work / "strategies").mkdir()
        (self.work / "strategies/bench.toml").write_text(
            STRATEGY.format(tls=self.tls, fields=FIELDS_HTML.strip()))
        user = "user root;" if os.geteuid() == 0 else ""
        conf = self.work / "nginx/nginx.conf"
        conf.write_text(NGINX.format(user=user, work=self.work, tls=self.tls, plain=self.plain))
        self.nginx = self.start("nginx", ["nginx", "-p", str(self.work / "nginx"), "-c", str(conf),
                                          "-g", "daemon off;"])
        wait_http(f"http://127.0.0.1:{self.plain}/product-reviews/{ITEM}.html")
        self.d1 = self.daemon("daemon1", 1, 19400)
        self.d8 = self.daemon("daemon8", 8, 19410)
        if self.old:
            self.o1 = self.daemon("old_daemon1", 1, 19420, self.old)
            self.o8 = self.daemon("old_daemon8", 8, 19430, self.old)

    def daemon(self, name, slots, base_port, build=None, extra=""):
        port = free_port()
        data = self.work / name / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.work / f"{name}.toml"
        cfg.write_text(DAEMON.format(port=port, work=self.work, slots=slots, base_port=base_port,
                                     data=data, root=ROOT) + extra)
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        p = self.start(name, [str((build or self.bin) / "idpool"), "--config", str(cfg), "serve"],
                       env)
        p.data = data
        wait_http(f"http://127.0.0.1:{port}/healthz")
        p.port, p.cfg = port, cfg
        return p

    # measurements
    def tool(self, *argv, build=None):
        r = subprocess.run([str((build or self.bin) / "examples/bench"), *argv],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"bench {' '.join(argv)} failed: {r.stderr.strip()[-2000:]}")
        return json.loads(r.stdout.strip().splitlines()[-1])

    def record(self, row, result):
        result["busy_before"] = self.busy
        self.samples.setdefault(row, []).append(result)
        rate = result.get("calls_per_sec")
        desc = f"{rate:,.0f}/s" if rate else ""
        if "p50_ms" in result:
            desc += f" p50 {result['p50_ms']:.2f} ms"
        log(f"  {row}: {desc} {'' if not result.get('errors') else '(errors: %s)' % result['errors']}")

    def measure(self, row, fn):
        self.busy = wait_idle(patience=2 if self.quick else 20)
        try:
            self.record(row, fn())
        except Exception as e:  # a failed row is reported, the bench goes on
            log(f"  {row}: FAILED: {e}")
            self.samples.setdefault(row, []).append({"failed": str(e)[:500]})

    def mcp(self, daemon, tool, args, c, stateless=False):
        # The client is always this build's: only the daemon differs.
        writes0 = metric(daemon.port, "idpool_audit_writes_total")
        r = self.tool("mcp", "--url", f"http://127.0.0.1:{daemon.port}/mcp", "--tool", tool,
                      "--args", json.dumps(args), "-c", str(c), "-d", str(self.secs),
                      "--watch-pid", str(daemon.pid), *(["--stateless"] if stateless else []))
        return self.per_call(daemon, r, writes0)

    def per_call(self, daemon, r, writes0):
        writes1 = metric(daemon.port, "idpool_audit_writes_total")
        r["server_cpu_per_call_us"] = per_call_us(r.get("server_cpu_s"), r["calls"])
        r["client_cpu_per_call_us"] = per_call_us(r["client_cpu_s"], r["calls"])
        if writes0 is not None and writes1 is not None and r["calls"]:
            # Warm-up calls (one per client) are counted too.
            r["audit_writes_per_call"] = (writes1 - writes0) / r["calls"]
        return r

    def rest(self, daemon, tool, args, c):
        writes0 = metric(daemon.port, "idpool_audit_writes_total")
        r = self.tool("rest", "--url", f"http://127.0.0.1:{daemon.port}/api/v1/tools/{tool}",
                      "--args", json.dumps(args), "-c", str(c), "-d", str(self.secs),
                      "--watch-pid", str(daemon.pid))
        return self.per_call(daemon, r, writes0)

    def stdio(self, daemon, tool, args, c):
        """`idpool mcp`, the stdio bridge an agent spawns, talking to `daemon`."""
        writes0 = metric(daemon.port, "idpool_audit_writes_total")
        r = self.tool("stdio", "--config", str(daemon.cfg), "--idpool", str(self.bin / "idpool"),
                      "--tool", tool, "--args", json.dumps(args), "-c", str(c),
                      "-d", str(self.secs), "--watch-pid", str(daemon.pid))
        return self.per_call(daemon, r, writes0)

    def wrk(self, path):
        r = subprocess.run(["wrk", "-t1", "-c64", f"-d{int(max(1, self.secs))}s", "--latency",
                            f"https://127.0.0.1:{self.tls}{path}"],
                           capture_output=True, text=True, timeout=120)
        out = r.stdout
        rps = float(out.split("Requests/sec:")[1].split()[0])
        # The latency distribution's own line: a "+/- Stdev" column such as
        # "71.50%" also contains "50%".
        m = re.search(r"^\s*50%\s+(\S+)", out, re.M)
        if not m:
            raise RuntimeError(f"wrk printed no 50% latency line: {out[-300:]}")
        p50 = parse_wrk_latency(m.group(1))
        return {"calls_per_sec": rps, "p50_ms": p50}

    def h2load(self, path):
        r = subprocess.run(["h2load", "-c1", "-m64", "-D", str(int(max(1, self.secs))),
                            f"https://127.0.0.1:{self.tls}{path}"],
                           capture_output=True, text=True, timeout=120)
        line = next(ln for ln in r.stdout.splitlines() if ln.startswith("finished in"))
        rps = float(line.split(",")[1].split()[0])
        return {"calls_per_sec": rps}

    def python(self, mode, path):
        py = self.args.python
        r = subprocess.run([py, str(ROOT / "bench/py_client.py"), mode,
                            f"https://127.0.0.1:{self.tls}{path}", str(self.work / "tls/ca.pem"),
                            "64", str(self.secs)], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(r.stderr.strip()[-2000:])
        res = json.loads(r.stdout.strip().splitlines()[-1])
        res["client_cpu_per_call_us"] = per_call_us(res["client_cpu_s"], res["calls"])
        return res

    def wreq(self, path):
        r = self.tool("wreq", "--url", f"https://127.0.0.1:{self.tls}{path}",
                      "--ca", str(self.work / "tls/ca.pem"), "-c", "64", "-d", str(self.secs))
        r["client_cpu_per_call_us"] = per_call_us(r["client_cpu_s"], r["calls"])
        return r

    def pool(self, tool, args, build=None):
        tag = "old" if build else "new"
        cfg = self.work / f"inproc-{tag}.toml"
        data = self.work / f"inproc-{tag}/data"
        data.mkdir(parents=True, exist_ok=True)
        cfg.write_text(DAEMON.format(port=free_port(), work=self.work, slots=1, base_port=19450,
                                     data=data, root=ROOT))
        r = self.tool("pool", "--config", str(cfg), "--tool", tool, "--args", json.dumps(args),
                      "-c", "64", "-d", str(self.secs), build=build)
        r["client_cpu_per_call_us"] = per_call_us(r["client_cpu_s"], r["calls"])
        return r

    def browser_warm(self):
        url = f"http://127.0.0.1:{self.plain}/product-reviews/{ITEM}.html"
        n = 10 if self.quick else 50
        raw = self.tool("cdp", "--url", url, "-n", str(n))
        return raw

    def browser_idpool_warm(self, daemon=None):
        daemon = daemon or self.d1
        url = f"http://127.0.0.1:{self.plain}/product-reviews/{ITEM}.html"
        args = {"url": url, "mode": "browser", "format": "html"}
        # Warm: one call first (launch, calibration), then c=1 for the window.
        self.tool("mcp-once", "--url", f"http://127.0.0.1:{daemon.port}/mcp", "--tool", "scrape",
                  "--args", json.dumps(args))
        return self.mcp(daemon, "scrape", args, 1)

    def browser_cold(self, build=None, standby=False):
        """A fresh daemon (empty data dir, so it calibrates): its first browser call;
        with `standby`, once its standby browser is ready (launched, calibrated)."""
        key = "old_browser_idpool_cold" if build else "browser_idpool_cold"
        if standby:
            key = "browser_idpool_standby"
        name = f"{key}{len(self.samples.get(key, []))}"
        extra = "\n[browser]\nstandby = 1\n" if standby else ""
        d = self.daemon(name, 1, 19440, build, extra)
        try:
            if standby:
                t0 = time.time()
                while not standby_ready(d.port):
                    if time.time() - t0 > 60:
                        raise RuntimeError("the standby browser was not ready in 60 s")
                    time.sleep(0.05)
                # Calibration runs after the launch: let it finish, as a
                # daemon that started a while before its first call has.
                while not standby_ready(d.port, calibrated=True):
                    if time.time() - t0 > 90:
                        raise RuntimeError("the standby browser was not calibrated in 90 s")
                    time.sleep(0.1)
            url = f"http://127.0.0.1:{self.plain}/product-reviews/{ITEM}.html"
            # The first call, then two more to the same page: what is left of
            # the first call once the browser runs is its first visit to the
            # site (a renderer process for the site, a connection).
            r = self.tool("mcp-count", "--url", f"http://127.0.0.1:{d.port}/mcp", "--tool",
                          "scrape", "--args", json.dumps({"url": url, "mode": "browser",
                                                          "format": "html"}), "-n", "3")
            r["ms"] = r["each_ms"][0]
            r["next_ms"] = statistics.median(r["each_ms"][1:])
        finally:
            self.stop(d)
            shutil.rmtree(self.work / name, ignore_errors=True)
        return r

    def memory(self):
        res = {"idle_rss_mb_1": rss_kb(self.d1.pid) / 1024, "idle_rss_mb_8": rss_kb(self.d8.pid) / 1024}
        return res

    def chromium_pss(self):
        url = f"http://127.0.0.1:{self.plain}/product-reviews/{ITEM}.html"
        args = {"url": url, "mode": "browser", "format": "html"}
        d = self.daemon("memory", 1, 19460)
        out = {}
        try:
            done = 0
            for target in ((10, 30) if self.quick else (100, 1000)):
                self.tool("mcp-count", "--url", f"http://127.0.0.1:{d.port}/mcp", "--tool",
                          "scrape", "--args", json.dumps(args), "-n", str(target - done))
                done = target
                tree = children_tree(d.pid)
                out[f"chromium_pss_mb_after_{target}"] = pss_kb(tree) / 1024
                out[f"chromium_rss_sum_mb_after_{target}"] = sum(rss_kb(p) for p in tree if os.path.exists(f"/proc/{p}")) / 1024
                out[f"daemon_rss_mb_after_{target}"] = rss_kb(d.pid) / 1024
        finally:
            self.stop(d)
        return out

    def run(self):
        self.setup()
        reviews = {"item": ITEM, "strategy": "bench"}
        page = {"strategy": "bench", "operation": "page", "params": {"item": ITEM}}
        json_path, html_path = f"/ajax/reviews/{ITEM}.json", f"/product-reviews/{ITEM}.html"
        rows = [
            ("limit_wrk_json", lambda: self.wrk(json_path)),
            ("limit_h2load_json", lambda: self.h2load(json_path)),
            ("wreq_json", lambda: self.wreq(json_path)),
            ("wreq_html", lambda: self.wreq(html_path)),
            ("python_json", lambda: self.python("json", json_path)),
            ("python_html", lambda: self.python("html", html_path)),
            ("pool_tier1", lambda: self.pool("get_reviews", reviews)),
            ("pool_tier2", lambda: self.pool("extract", page)),
            ("mcp_get_reviews_c64", lambda: self.mcp(self.d1, "get_reviews", reviews, 64)),
            ("mcp_get_reviews_c64_8slots", lambda: self.mcp(self.d8, "get_reviews", reviews, 64)),
            ("mcp_get_reviews_c1", lambda: self.mcp(self.d1, "get_reviews", reviews, 1)),
            ("mcp_extract_c64", lambda: self.mcp(self.d1, "extract", page, 64)),
            ("mcp_extract_c1", lambda: self.mcp(self.d1, "extract", page, 1)),
            ("mcp_pool_status_c1", lambda: self.mcp(self.d1, "pool_status", {}, 1)),
            ("mcp_list_strategies_c1", lambda: self.mcp(self.d1, "list_strategies", {}, 1)),
            ("mcp_pool_status_c64", lambda: self.mcp(self.d1, "pool_status", {}, 64)),
            ("mcp_stateless_get_reviews_c64",
             lambda: self.mcp(self.d1, "get_reviews", reviews, 64, stateless=True)),
            ("mcp_stateless_get_reviews_c1",
             lambda: self.mcp(self.d1, "get_reviews", reviews, 1, stateless=True)),
            ("rest_get_reviews_c64", lambda: self.rest(self.d1, "get_reviews", reviews, 64)),
            ("stdio_get_reviews_c1", lambda: self.stdio(self.d1, "get_reviews", reviews, 1)),
            ("stdio_get_reviews_c64", lambda: self.stdio(self.d1, "get_reviews", reviews, 64)),
        ]
        if self.old:
            o = self.old
            rows += [
                ("old_pool_tier1", lambda: self.pool("get_reviews", reviews, o)),
                ("old_pool_tier2", lambda: self.pool("extract", page, o)),
                ("old_mcp_get_reviews_c64", lambda: self.mcp(self.o1, "get_reviews", reviews, 64)),
                ("old_mcp_get_reviews_c64_8slots",
                 lambda: self.mcp(self.o8, "get_reviews", reviews, 64)),
                ("old_mcp_get_reviews_c1", lambda: self.mcp(self.o1, "get_reviews", reviews, 1)),
                ("old_mcp_extract_c64", lambda: self.mcp(self.o1, "extract", page, 64)),
                ("old_mcp_pool_status_c1", lambda: self.mcp(self.o1, "pool_status", {}, 1)),
            ]
        browser_rows = [
            ("browser_raw", self.browser_warm),
            ("browser_idpool_warm", self.browser_idpool_warm),
            ("browser_idpool_cold", self.browser_cold),
            ("browser_idpool_standby", lambda: self.browser_cold(standby=True)),
        ]
        if self.old:
            browser_rows += [
                ("old_browser_idpool_warm", lambda: self.browser_idpool_warm(self.o1)),
                ("old_browser_idpool_cold", lambda: self.browser_cold(self.old)),
            ]
        # Idle memory before any call.
        time.sleep(1)
        self.busy = 0.0
        self.record("memory_idle", self.memory())
        for r in range(self.rounds):
            log(f"round {r + 1}/{self.rounds}")
            for name, fn in paired(rows + browser_rows, r):
                self.measure(name, fn)
        self.measure("memory_chromium", self.chromium_pss)
        self.stop_all()
        return self.report()

    def report(self):
        raw = {"machine": machine(), "rounds": self.rounds, "seconds": self.secs,
               "quick": self.quick, "profile": self.args.profile, "samples": self.samples}
        (self.out / "raw.json").write_text(json.dumps(raw, indent=1))
        md = render(raw)
        (self.out / "report.md").write_text(md)
        latest = ROOT / "bench/results/latest.md"
        latest.write_text(md)
        print(md)
        log(f"report: {self.out / 'report.md'}")
        failed = [k for k, v in self.samples.items() if any("failed" in s for s in v)]
        return failed


def metric(port, name):
    """A counter's value from the daemon's /metrics (None: not there)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def standby_ready(port, calibrated=False):
    """Whether the daemon's standby browser is ready (and, asked, its slot calibrated)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/tools/pool_status",
                                 data=b"{}", headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            st = json.loads(r.read())
    except (OSError, ValueError):
        return False
    st = st.get("structuredContent", st)
    if (st.get("standby") or {}).get("ready", 0) < 1:
        return False
    if not calibrated:
        return True
    cal = (st.get("slots") or [{}])[0].get("calibration") or {}
    return cal.get("state") in ("calibrated", "failed", "uncalibrated", "off", "not_applicable")


def per_call_us(cpu_s, calls):
    if cpu_s is None or not calls:
        return None
    return cpu_s / calls * 1e6


def parse_wrk_latency(s):
    for unit, f in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if s.endswith(unit):
            return float(s[: -len(unit)]) * f
    return float(s)


def machine():
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                if ln.startswith("model name")), "?")
    return {"cpus": os.cpu_count(), "cpu": cpu, "kernel": os.uname().release}


# --- report -------------------------------------------------------------------

def spread_of(samples, key, unit=""):
    vals = [s[key] for s in samples if s.get(key) is not None and "failed" not in s]
    if len(vals) < 2:
        return "–"
    return f"{min(vals):,.0f}–{max(vals):,.0f}{unit}"


def med(samples, key):
    vals = [s[key] for s in samples if s.get(key) is not None and "failed" not in s]
    return statistics.median(vals) if vals else None


def fmt(v, unit="", digits=0):
    if v is None:
        return "–"
    return f"{v:,.{digits}f}{unit}"


LABELS = [
    ("limit_wrk_json", "limit: wrk → nginx JSON (HTTP/1.1, 64 conns)"),
    ("limit_h2load_json", "limit: h2load → nginx JSON (HTTP/2, 1 conn × 64 streams)"),
    ("wreq_json", "raw wreq fetch of the JSON (c=64)"),
    ("wreq_html", "raw wreq fetch of the page (c=64)"),
    ("python_json", "Python: curl_cffi fetch + json.loads + dumps (c=64)"),
    ("python_html", "Python: curl_cffi fetch + lxml parse + fields (c=64)"),
    ("pool_tier1", "idpool pool API in-process: get_reviews tier 1 (c=64)"),
    ("pool_tier2", "idpool pool API in-process: extract tier 2 (c=64)"),
    ("mcp_get_reviews_c64", "**idpool MCP `get_reviews` tier 1, c=64**"),
    ("mcp_get_reviews_c64_8slots", "idpool MCP `get_reviews` tier 1, c=64, 8 slots"),
    ("mcp_get_reviews_c1", "idpool MCP `get_reviews` tier 1, c=1"),
    ("mcp_extract_c64", "**idpool MCP `extract` tier 2, c=64**"),
    ("mcp_extract_c1", "idpool MCP `extract` tier 2, c=1"),
    ("mcp_pool_status_c1", "idpool MCP `pool_status`, c=1"),
    ("mcp_pool_status_c64", "idpool MCP `pool_status`, c=64"),
    ("mcp_list_strategies_c1", "idpool MCP `list_strategies`, c=1"),
    ("mcp_stateless_get_reviews_c64", "idpool MCP `get_reviews` tier 1, 2026-07-28 stateless, c=64"),
    ("mcp_stateless_get_reviews_c1", "idpool MCP `get_reviews` tier 1, 2026-07-28 stateless, c=1"),
    ("rest_get_reviews_c64", "idpool REST `POST /api/v1/tools/get_reviews`, c=64"),
    ("stdio_get_reviews_c1", "idpool stdio bridge (`idpool mcp`) `get_reviews`, c=1"),
    ("stdio_get_reviews_c64", "idpool stdio bridge (`idpool mcp`) `get_reviews`, 64 in flight"),
    ("browser_raw", "browser: raw chromiumoxide navigation + content, warm"),
    ("browser_idpool_warm", "browser: idpool MCP `scrape` mode browser, warm (c=1)"),
]


def cpu_per_call(samples):
    s = med(samples, "server_cpu_per_call_us")
    return s if s is not None else med(samples, "client_cpu_per_call_us")


def render(raw):
    S = raw["samples"]
    get = lambda k: S.get(k, [])  # noqa: E731
    m = raw["machine"]
    lines = [
        "# idpool bench",
        "",
        f"Machine: {m['cpus']} CPUs ({m['cpu']}), Linux {m['kernel']}. "
        f"{raw['rounds']} interleaved round(s) of {raw['seconds']:g} s per row; medians; "
        f"`{raw.get('profile', 'release')}` build."
        + (" **Quick run: smoke test only, not a measurement.**" if raw["quick"] else ""),
        "",
        "CPU per call: the daemon's own CPU (from /proc) for MCP rows; the whole client "
        "process for the raw wreq, Python and in-process rows.",
        "",
        "| per call | calls/s | spread (rounds' min–max calls/s) | p50 | p99 | CPU per call | bytes per response |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in LABELS:
        s = get(key)
        if not s:
            continue
        if all("failed" in x for x in s):
            lines.append(f"| {label} | failed: {s[0]['failed'][:80]} | | | | | |")
            continue
        lines.append(
            f"| {label} | {fmt(med(s, 'calls_per_sec'))} | {spread_of(s, 'calls_per_sec')} | "
            f"{fmt(med(s, 'p50_ms'), ' ms', 2)} | "
            f"{fmt(med(s, 'p99_ms'), ' ms', 2)} | {fmt(cpu_per_call(s), ' µs')} | "
            f"{fmt(med(s, 'bytes_per_call'))} |")
    raw_cold = med(get("browser_raw"), "cold_ms")
    cold = med(get("browser_idpool_cold"), "ms")
    ready = med(get("browser_idpool_standby"), "ms")
    warm = med(get("browser_idpool_warm"), "p50_ms")
    lines.append(f"| browser: raw chromiumoxide launch → first content (cold) | – | "
                 f"{spread_of(get('browser_raw'), 'cold_ms', ' ms')} | {fmt(raw_cold, ' ms')} | | | |")
    lines.append(f"| browser: idpool first browser call of a fresh daemon, no standby "
                 f"(launch + first page) | – | {spread_of(get('browser_idpool_cold'), 'ms', ' ms')} | "
                 f"{fmt(cold, ' ms')} | | | |")
    lines.append(f"| browser: idpool first browser call of a fresh daemon, `browser.standby = 1` | – | "
                 f"{spread_of(get('browser_idpool_standby'), 'ms', ' ms')} | {fmt(ready, ' ms')} | | | |")
    lines.append(f"| browser: the same daemon's next calls to that page (site visited) | – | "
                 f"{spread_of(get('browser_idpool_standby'), 'next_ms', ' ms')} | "
                 f"{fmt(med(get('browser_idpool_standby'), 'next_ms'), ' ms')} | | | |")
    writes = med(get("mcp_get_reviews_c64"), "audit_writes_per_call")
    if writes is not None:
        lines += ["", f"Audit log: {writes:.3f} `write` calls per call at MCP `get_reviews` c=64 "
                  f"({fmt(med(get('mcp_get_reviews_c1'), 'audit_writes_per_call'), '', 3)} at c=1): "
                  "the group commit's batching (`idpool_audit_writes_total`)."]
    mem = (get("memory_idle") or [{}])[0]
    chrome = (get("memory_chromium") or [{}])[0]
    lines += ["", "| memory | MB |", "|---|---:|",
              f"| idle daemon RSS, 1 slot | {fmt(mem.get('idle_rss_mb_1'), '', 1)} |",
              f"| idle daemon RSS, 8 slots | {fmt(mem.get('idle_rss_mb_8'), '', 1)} |"]
    for k in sorted(chrome):
        if isinstance(chrome[k], (int, float)) and k != "busy_before":
            lines.append(f"| {k.replace('_', ' ')} | {fmt(chrome[k], '', 1)} |")

    def ratio(a, b):
        return a / b if a is not None and b else None

    rate = lambda k: med(get(k), "calls_per_sec")  # noqa: E731
    goals = [
        # Issue 37's.
        ("MCP `get_reviews` tier 1, c=64 ≥ 0.5× raw wreq fetch-only calls/s",
         ratio(rate("mcp_get_reviews_c64"), rate("wreq_json")), lambda v: v >= 0.5, "×", 2),
        ("MCP `get_reviews` tier 1, c=64 ≥ 5× Python curl_cffi + json calls/s",
         ratio(rate("mcp_get_reviews_c64"), rate("python_json")), lambda v: v >= 5, "×", 2),
        ("MCP `get_reviews` tier 1, c=64: daemon CPU per call ≤ 2.5× raw wreq's per request",
         ratio(cpu_per_call(get("mcp_get_reviews_c64")), cpu_per_call(get("wreq_json"))),
         lambda v: v <= 2.5, "×", 2),
        ("in-process tier 1 ≥ 0.8× raw wreq fetch-only calls/s",
         ratio(rate("pool_tier1"), rate("wreq_json")), lambda v: v >= 0.8, "×", 2),
        ("MCP `get_reviews` c=64: 8 slots ≥ 0.95× 1 slot (calls/s)",
         ratio(rate("mcp_get_reviews_c64_8slots"), rate("mcp_get_reviews_c64")),
         lambda v: v >= 0.95, "×", 2),
        ("`pool_status` at c=1: daemon CPU per call ≤ 100 µs",
         cpu_per_call(get("mcp_pool_status_c1")), lambda v: v <= 100, " µs", 0),
        ("first browser call of a fresh daemon with `browser.standby = 1` ≤ 1.5× a warm call",
         ratio(ready, warm), lambda v: v <= 1.5, "×", 2),
        # The first speed issue's.
        ("`pool_status` over MCP at c=1: p50 ≤ 0.5 ms", med(get("mcp_pool_status_c1"), "p50_ms"),
         lambda v: v <= 0.5, " ms", 2),
        ("`get_reviews` tier 1, c=64: calls/s ≥ 3.5× Python curl_cffi + json",
         ratio(rate("mcp_get_reviews_c64"), rate("python_json")), lambda v: v >= 3.5, "×", 2),
        ("`get_reviews` tier 1, c=64: daemon CPU per call ≤ 3× raw wreq's",
         ratio(cpu_per_call(get("mcp_get_reviews_c64")), cpu_per_call(get("wreq_json"))),
         lambda v: v <= 3, "×", 2),
        ("`extract` tier 2, c=64: daemon CPU per call ≤ 0.5× Python curl_cffi + lxml's",
         ratio(cpu_per_call(get("mcp_extract_c64")), cpu_per_call(get("python_html"))),
         lambda v: v <= 0.5, "×", 2),
        ("pool API in-process, tier 1 with extraction: ≥ 0.7× raw wreq fetch-only calls/s",
         ratio(rate("pool_tier1"), rate("wreq_json")), lambda v: v >= 0.7, "×", 2),
        ("pool of 8 slots ≥ 0.9× pool of 1 (calls/s)",
         ratio(rate("mcp_get_reviews_c64_8slots"), rate("mcp_get_reviews_c64")),
         lambda v: v >= 0.9, "×", 2),
        ("browser warm p50 ≤ 1.1× raw chromiumoxide",
         ratio(med(get("browser_idpool_warm"), "p50_ms"), med(get("browser_raw"), "p50_ms")),
         lambda v: v <= 1.1, "×", 2),
        ("browser cold first call ≤ 1.05× raw launch → first content", ratio(cold, raw_cold),
         lambda v: v <= 1.05, "×", 2),
        ("idle daemon with 8 slots ≤ 30 MB RSS", mem.get("idle_rss_mb_8"), lambda v: v <= 30,
         " MB", 1),
    ]
    lines += ["", "| goal | measured | met |", "|---|---:|:---:|"]
    for label, v, ok, unit, digits in goals:
        lines.append(f"| {label} | {fmt(v, unit, digits)} | "
                     f"{'–' if v is None else ('yes' if ok(v) else '**no**')} |")
    lines += versus(S)
    lines.append("")
    return "\n".join(lines)


# Rows measured for both builds with `--versus`.
VERSUS = ["pool_tier1", "pool_tier2", "mcp_get_reviews_c64", "mcp_get_reviews_c64_8slots",
          "mcp_get_reviews_c1", "mcp_extract_c64", "mcp_pool_status_c1"]


def versus(S):
    """The older build (`--versus`) and this one, row by row, from one run."""
    if not any(S.get(f"old_{k}") for k in VERSUS):
        return []
    labels = dict(LABELS)
    lines = ["", "Before (`--versus` build) and after (this build), rows interleaved in the "
             "same rounds; spread: the smallest and largest of the rounds.", "",
             "| per call | before calls/s | after calls/s | after ÷ before | before p50 | "
             "after p50 | before CPU/call | after CPU/call | spread before | spread after |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k in VERSUS:
        b, a = S.get(f"old_{k}", []), S.get(k, [])
        rb, ra = med(b, "calls_per_sec"), med(a, "calls_per_sec")

        def spread(xs):
            v = sorted(x["calls_per_sec"] for x in xs if "calls_per_sec" in x)
            return f"{v[0]:,.0f}–{v[-1]:,.0f}" if v else "–"
        lines.append(
            f"| {labels.get(k, k)} | {fmt(rb)} | {fmt(ra)} | "
            f"{fmt(ra / rb if ra and rb else None, '×', 2)} | {fmt(med(b, 'p50_ms'), ' ms', 2)} | "
            f"{fmt(med(a, 'p50_ms'), ' ms', 2)} | {fmt(cpu_per_call(b), ' µs')} | "
            f"{fmt(cpu_per_call(a), ' µs')} | {spread(b)} | {spread(a)} |")
    if S.get("old_browser_idpool_warm") or S.get("old_browser_idpool_cold"):
        raw = med(S.get("browser_raw", []), "p50_ms")
        raw_cold = med(S.get("browser_raw", []), "cold_ms")

        def p50s(xs, key):
            v = sorted(x[key] for x in xs if x.get(key) is not None)
            return f"{v[0]:,.1f}–{v[-1]:,.1f}" if v else "–"
        lines += ["", "The browser rows, before and after in the same rounds (raw chromiumoxide "
                  "measured in those rounds too):", "",
                  "| browser | before | after | after ÷ before | raw chromiumoxide | "
                  "before ÷ raw | after ÷ raw | spread before | spread after |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for label, key, field, base in [
                ("warm `scrape` p50", "browser_idpool_warm", "p50_ms", raw),
                ("first call of a fresh daemon", "browser_idpool_cold", "ms", raw_cold)]:
            b, a = med(S.get(f"old_{key}", []), field), med(S.get(key, []), field)
            lines.append(
                f"| {label} | {fmt(b, ' ms', 2)} | {fmt(a, ' ms', 2)} | "
                f"{fmt(a / b if a and b else None, '×', 2)} | {fmt(base, ' ms', 2)} | "
                f"{fmt(b / base if b and base else None, '×', 2)} | "
                f"{fmt(a / base if a and base else None, '×', 2)} | "
                f"{p50s(S.get(f'old_{key}', []), field)} | {p50s(S.get(key, []), field)} |")
        b, a = S.get("old_browser_idpool_warm", []), S.get("browser_idpool_warm", [])
        lines.append(f"| warm `scrape` daemon CPU per call | {fmt(cpu_per_call(b), ' µs')} | "
                     f"{fmt(cpu_per_call(a), ' µs')} | | | | | | |")
    return lines


def compare(before, after):
    """A before/after table of two runs' medians (two raw.json files)."""
    B, A = before["samples"], after["samples"]
    lines = ["| per call | before calls/s | after calls/s | before p50 | after p50 | "
             "before CPU/call | after CPU/call |", "|---|---:|---:|---:|---:|---:|---:|"]
    for key, label in LABELS:
        b, a = B.get(key, []), A.get(key, [])
        if not b and not a:
            continue
        lines.append(
            f"| {label} | {fmt(med(b, 'calls_per_sec'))} | {fmt(med(a, 'calls_per_sec'))} | "
            f"{fmt(med(b, 'p50_ms'), ' ms', 2)} | {fmt(med(a, 'p50_ms'), ' ms', 2)} | "
            f"{fmt(cpu_per_call(b), ' µs')} | {fmt(cpu_per_call(a), ' µs')} |")
    cold = lambda S: med(S.get("browser_idpool_cold", []), "ms")  # noqa: E731
    lines.append(f"| browser: idpool first browser call of a fresh daemon | | | "
                 f"{fmt(cold(B), ' ms')} | {fmt(cold(A), ' ms')} | | |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--target-dir", default=str(ROOT / "target"))
    ap.add_argument("--profile", default="release",
                    help="the build under --target-dir (`debug` for a smoke run on the test build)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--versus", metavar="DIR",
                    help="an older build's folder (with idpool and examples/bench): its daemon "
                         "and pool rows run in the same rounds, for a before/after in one run")
    ap.add_argument("--render", help="re-render a raw.json and print it")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"),
                    help="print a before/after table of two raw.json files")
    args = ap.parse_args()
    if args.compare:
        b, a = (json.loads(pathlib.Path(p).read_text()) for p in args.compare)
        print(compare(b, a))
        return 0
    if args.render:
        print(render(json.loads(pathlib.Path(args.render).read_text())))
        return 0
    b = Bench(args)

    def on_signal(signum, _frame):
        b.stop_all()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        failed = b.run()
    finally:
        b.stop_all()
    if failed:
        log(f"rows that failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
