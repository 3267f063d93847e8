#!/usr/bin/env python3
"""scripts/fleet-bench.sh's driver: a fleet at scale on one machine.

Starts a real redis-server, the bundled testbed and N idpool daemons on
loopback, and measures what docs/fleet.md quotes:

1. 10 daemons x 4 identities, 20 closed-loop callers over a fleet in-flight
   bound of 16 (a 20,000-call run: calls/s by tenth, Redis commands per
   second and per call, net of the idle heartbeat), and the same callers
   with the bound raised to 24;
2. a site-wide limit of 10 requests/s on the shop: what the fleet sends
   after its first 10 s, and how much of it is refused;
3. a daemon SIGKILLed under load: when its places are back with the others,
   when its identities are adopted, whether any identity is held twice;
4. 25 daemons x 40 identities (1,000): Redis commands per call, and what
   the idle fleet costs Redis per identity per second.

Redis commands are Redis's own count (`total_commands_processed`: the
commands inside scripts included). Every process it starts is ended and
reaped by PID. Nothing leaves loopback.
"""

import argparse
import http.client
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
REDIS_PORT = 6391
TB_HTTPS, TB_HTTP = 28443, 28080
API_BASE = 28800
CDP_BASE = 21000


def log(msg):
    print(f"fleet-bench: {msg}", file=sys.stderr, flush=True)


class Procs:
    """Every process started here, ended and reaped by PID."""

    def __init__(self):
        self.procs = []

    def start(self, args, **kw):
        p = subprocess.Popen(args, **kw)
        self.procs.append(p)
        return p

    def end(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def end_all(self):
        for p in list(reversed(self.procs)):
            self.end(p)


def wait_for(pred, secs, what):
    t0 = time.time()
    while time.time() - t0 < secs:
        try:
            if pred():
                return time.time() - t0
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"fleet-bench: {what} did not happen within {secs} s")


def http_json(port, method, path, body=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        c.request(method, path, body=data, headers={"content-type": "application/json"})
        r = c.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw or b"null")
        except ValueError:
            return r.status, raw.decode(errors="replace")
    finally:
        c.close()


class Redis:
    def __init__(self, procs, work):
        self.password = os.urandom(12).hex()
        conf = work / "redis.conf"
        conf.write_text(f"requirepass {self.password}\n")
        conf.chmod(0o600)
        self.p = procs.start(
            ["redis-server", str(conf), "--bind", "127.0.0.1", "--port", str(REDIS_PORT),
             "--save", "", "--appendonly", "no", "--dir", str(work)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: self.cli("PING").strip() == "PONG", 10, "redis-server answering")

    def cli(self, *args):
        env = dict(os.environ, REDISCLI_AUTH=self.password)
        return subprocess.run(["redis-cli", "-p", str(REDIS_PORT), *args], env=env,
                              capture_output=True, text=True, timeout=30).stdout

    def commands(self):
        for line in self.cli("INFO", "stats").splitlines():
            if line.startswith("total_commands_processed:"):
                return int(line.split(":")[1])
        raise SystemExit("fleet-bench: no total_commands_processed in INFO")

    def url(self):
        return f"redis://:{self.password}@127.0.0.1:{REDIS_PORT}/"


class Fleet:
    """N daemons of `slots` identities each (and `spares` spare slots)."""

    def __init__(self, procs, bin_dir, work, redis, n, slots, bound, spares=1, ttl=5, start=0,
                 wait=True):
        self.procs, self.work, self.n = procs, work, n
        self.bin_dir, self.redis, self.ttl, self.spares, self.slots = bin_dir, redis, ttl, spares, slots
        strategies = work / "strategies"
        shutil.rmtree(strategies, ignore_errors=True)
        strategies.mkdir(parents=True)
        shop = (ROOT / "strategies/testshop.toml").read_text()
        shop = shop.replace("https://127.0.0.1:8443", f"https://127.0.0.1:{TB_HTTPS}")
        shop = shop.replace("global_max_in_flight = 16", f"global_max_in_flight = {bound}")
        (strategies / "testshop.toml").write_text(shop)
        key = work / "cluster.key"
        key.write_text(os.urandom(24).hex())
        key.chmod(0o600)
        self.daemons = []
        self.strategies, self.key = strategies, key
        for i in range(start, start + n):
            shutil.rmtree(work / f"n{i:02}", ignore_errors=True)
            self.daemons.append(self.launch(i))
        if wait:
            self.wait_ready()

    def launch(self, i):
        """Start daemon i (its folder kept: a restart is the same daemon)."""
        work, slots, spares, strategies, key = self.work, self.slots, self.spares, self.strategies, self.key
        env = dict(os.environ, IDPOOL_REDIS_URL=self.redis.url(), RUST_LOG="warn")
        d = work / f"n{i:02}"
        d.mkdir(parents=True, exist_ok=True)
        port = API_BASE + i
        (d / "idpool.toml").write_text(f"""[server]
listen = "127.0.0.1:{port}"
anonymous_role = "operator"

[pool]
size = {slots}
base_port = {CDP_BASE + i * (slots + spares + 2)}
data_dir = "data"
strategies_dir = "{strategies}"
profiles_dir = "{ROOT / 'profiles'}"

[security]
allow_private_networks = true
extra_root_certs = ["{work / 'testbed/ca.pem'}"]

[cluster]
node = "n{i:02}"
key_file = "{key}"
lease_ttl_secs = {self.ttl}
adopt = true
spare_slots = {spares}
""")
        p = self.procs.start([str(self.bin_dir / "idpool"), "--config", str(d / "idpool.toml"), "serve"],
                             stdout=subprocess.DEVNULL, stderr=open(d / "daemon.log", "ab"), env=env)
        return (f"n{i:02}", port, p)

    def wait_ready(self, secs=600):
        for name, port, p in self.daemons:
            wait_for(lambda port=port: http_json(port, "GET", "/readyz")[0] == 200, secs, f"{name} ready")
            if p.poll() is not None:
                # Another process answers on its port: not this fleet's daemon.
                raise SystemExit(f"fleet-bench: {name} exited ({p.returncode}); see {self.work / name / 'daemon.log'}")

    def ports(self):
        return [port for _, port, p in self.daemons if p.poll() is None]

    def status(self, port):
        return http_json(port, "POST", "/api/v1/tools/pool_status", {})[1]

    def held(self, port):
        # Every slot (a tool's answer comes in pieces of ten slots).
        return [s["fleet_id"] for s in http_json(port, "GET", "/api/v1/slots")[1]["slots"] if s.get("held")]

    def stop(self):
        for _, _, p in self.daemons:
            self.procs.end(p)

    def cluster(self, port):
        return self.status(port)["cluster"]


def load(ports, callers, calls=None, secs=None, tag="B"):
    """Closed-loop callers spread over `ports`: each calls get_reviews until
    `calls` in all are done or `secs` pass. Answers (ok, failed, the end time
    of every call that succeeded, the first failure)."""
    lock = threading.Lock()
    state = {"left": calls if calls is not None else 1 << 62, "ok": 0, "failed": 0, "first": None}
    ends = []
    deadline = time.time() + (secs if secs is not None else 1e9)

    def caller(k):
        port = ports[k % len(ports)]
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        n = 0
        while time.time() < deadline:
            with lock:
                if state["left"] <= 0:
                    break
                state["left"] -= 1
            n += 1
            body = json.dumps({"item": f"B0{tag}{k:02}{n % 50:02}", "strategy": "testshop"})
            try:
                c.request("POST", "/api/v1/tools/get_reviews", body=body,
                          headers={"content-type": "application/json"})
                r = c.getresponse()
                v = json.loads(r.read() or b"null")
                code = r.status
            except (OSError, http.client.HTTPException, ValueError) as e:
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                code, v = 0, str(e)
            with lock:
                if code == 200:
                    state["ok"] += 1
                    ends.append(time.time())
                else:
                    state["failed"] += 1
                    state["first"] = state["first"] or f"{code} {str(v)[:300]}"
            if code != 200:
                # What a caller that reads the answer does.
                wait = v.get("retry_after") if isinstance(v, dict) else None
                time.sleep(min(max(wait or 0.2, 0.05), 2.0))
        c.close()

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return state["ok"], state["failed"], sorted(ends), state["first"]


def idle_cost(redis, secs):
    c0 = redis.commands()
    time.sleep(secs)
    return (redis.commands() - c0 - 1) / secs


def measured_run(redis, fleet, callers, calls, idle):
    c0, t0 = redis.commands(), time.time()
    ok, failed, ends, first = load(fleet.ports(), callers, calls=calls)
    secs = time.time() - t0
    cmds = redis.commands() - c0
    out = {"calls": ok, "failed": failed, "secs": round(secs, 1), "calls_per_sec": round(ok / secs, 1),
           "redis_per_sec": round(cmds / secs, 1), "redis_per_call": round(cmds / max(ok, 1), 2),
           "redis_per_call_net": round((cmds - idle * secs) / max(ok, 1), 2), "first_failure": first}
    if ends and ok >= 100:
        span = (ends[-1] - ends[0]) / 10
        tenths = [sum(1 for e in ends if ends[0] + i * span <= e < ends[0] + (i + 1) * span) for i in range(10)]
        tenths[-1] += sum(1 for e in ends if e >= ends[0] + 10 * span)
        out["tenths"] = tenths
        out["last_over_first"] = round(tenths[-1] / max(tenths[0], 1), 2)
    return out


def site_limit(redis, fleet, callers, secs, idle):
    """`callers` closed-loop callers spread over every daemon for `secs`
    against a site-wide limit of 10 requests/s (429, Retry-After: 1): what
    the fleet sends after its first 10 s, how much is refused, and what
    Redis runs meanwhile (callers wait on the resting site) against its
    idle rate."""
    log(f"site-wide limit 10/s for {secs} s, {callers} callers over {len(fleet.ports())} daemons")
    before = http_json(TB_HTTP, "GET", "/__control/log")[1]
    from_ms = max((e["done_ms"] for e in before), default=0)
    tb_mode({"site_limit": {"max_per_sec": 10, "retry_after": 1}})
    c0, t0 = redis.commands(), time.time()
    ok, failed, _, _ = load(fleet.ports(), callers, secs=secs, tag="L")
    redis_per_sec = (redis.commands() - c0) / (time.time() - t0)
    tb_mode({"site_limit": None})
    seen = [e for e in http_json(TB_HTTP, "GET", "/__control/log")[1] if e["at_ms"] > from_ms]
    # From the phase's first request (the testbed's clock).
    first_s = min(e["at_ms"] for e in seen) // 1000 + 1
    last_s = max(e["at_ms"] for e in seen) // 1000
    # Whole seconds after the first 10 (the last, partial one left out).
    judged = [e for e in seen if first_s + 10 <= e["at_ms"] // 1000 < last_s]
    n_secs = max(last_s - first_s - 10, 1)
    refused = sum(1 for e in judged if e["status"] == 429)
    budget = fleet.status(fleet.ports()[0])["strategies"]["testshop"]
    return {"daemons": len(fleet.ports()), "callers": callers, "calls_ok": ok, "calls_failed": failed,
            "judged_secs": n_secs,
            "sent_per_sec_after_10s": round(len(judged) / n_secs, 2),
            "refused_after_10s": refused, "refused_share": round(refused / max(len(judged), 1), 4),
            "refused_first_10s": sum(1 for e in seen if e["status"] == 429 and e["at_ms"] // 1000 < first_s + 10),
            "redis_per_sec": round(redis_per_sec, 1), "idle_redis_per_sec": round(idle, 1),
            "redis_over_idle": round(redis_per_sec / max(idle, 0.1), 2),
            "budget": budget}


def events_of(port, kinds):
    """How many of this daemon's recent events are of each of `kinds`."""
    code, v = http_json(port, "GET", "/api/v1/events/recent")
    evs = v.get("events", []) if code == 200 and isinstance(v, dict) else []
    return {k: sum(1 for e in evs if e.get("kind") == k) for k in kinds}


def sweep(fleet):
    """Every live daemon's held identities: (ids held twice, seconds the sweep took)."""
    t = time.time()
    seen = {}
    twice = set()
    for _, p, proc in fleet.daemons:
        if proc.poll() is not None:
            continue
        try:
            for fid in fleet.held(p):
                if fid in seen:
                    twice.add(fid)
                seen[fid] = p
        except (OSError, KeyError, TypeError, http.client.HTTPException):
            pass
    return twice, time.time() - t


def scale(procs, bin_dir, work, redis, n, m, secs):
    """n daemons x m identities started together: what moved between live
    daemons while they started, the slowest heartbeat, Redis per idle
    identity, and what the fleet sends under a site-wide 10/s limit."""
    log(f"{n} daemons x {m} identities, started together")
    redis.cli("FLUSHALL")
    t0 = time.time()
    fleet = Fleet(procs, bin_dir, work, redis, n, m, 16, wait=False)
    twice, sweeps, sweep_secs = set(), 0, []
    ready = set()
    while len(ready) < n and time.time() - t0 < 900:
        for name, port, _ in fleet.daemons:
            if name not in ready:
                try:
                    if http_json(port, "GET", "/readyz", timeout=5)[0] == 200:
                        ready.add(name)
                except (OSError, http.client.HTTPException):
                    pass
        t, took = sweep(fleet)
        twice |= t
        sweeps += 1
        sweep_secs.append(took)
        time.sleep(0.5)
    if len(ready) < n:
        raise SystemExit(f"fleet-bench: only {len(ready)} of {n} daemons ready")
    start_secs = time.time() - t0
    # Two TTLs more: a late renewal would have cost an identity by now.
    settle = time.time() + 2 * fleet.ttl
    while time.time() < settle:
        t, took = sweep(fleet)
        twice |= t
        sweeps += 1
        sweep_secs.append(took)
    ports = fleet.ports()
    kinds = ("identity_lost", "identity_adopted")
    moved = {k: 0 for k in kinds}
    adopted, slowest, unhosted = 0, 0, 0
    for p in ports:
        for k, v in events_of(p, kinds).items():
            moved[k] += v
        c = fleet.cluster(p)
        adopted += c.get("adopted", 0)
        slowest = max(slowest, c.get("slowest_beat_ms", 0))
        unhosted = max(unhosted, c.get("unhosted", 0))
    idle = idle_cost(redis, 15)
    sweep_secs.sort()
    r = {"daemons": n, "identities_each": m, "lease_ttl_s": fleet.ttl, "all_ready_after_s": round(start_secs, 1),
         "adopted_from_live_daemons": adopted, "identity_lost_events": moved["identity_lost"],
         "identity_adopted_events": moved["identity_adopted"], "held_twice": sorted(twice), "sweeps": sweeps,
         "sweep_p50_s": round(sweep_secs[len(sweep_secs) // 2], 3), "sweep_max_s": round(sweep_secs[-1], 3),
         "slowest_beat_ms_last_minute": slowest, "unhosted": unhosted,
         "idle_redis_per_sec": round(idle, 1), "idle_per_identity_per_sec": round(idle / (n * m), 4)}
    log(json.dumps(r))
    r["site_limit_10"] = site_limit(redis, fleet, max(20, n), secs, idle)
    log(json.dumps(r["site_limit_10"]))
    fleet.stop()
    return r


def unhosted_run(procs, bin_dir, work, redis, fleet, kill, idle):
    """SIGKILL `kill` daemons of `fleet` (more identities than the others'
    spare slots): when every view counts their identities without a host,
    how many stay so, and how soon the first killed daemon, restarted,
    takes its own back."""
    victims = fleet.daemons[-kill:]
    live = [d for d in fleet.daemons if d not in victims]
    watch = live[0][1]
    spare_room = len(live) * fleet.spares
    lost = kill * fleet.slots
    t = time.time()
    for _, _, p in victims:
        p.send_signal(signal.SIGKILL)
        p.wait()
    seen = stable = None
    peak = 0
    expect = max(lost - spare_room, 0)
    while time.time() - t < 6 * fleet.ttl and stable is None:
        c = fleet.cluster(watch)
        peak = max(peak, c.get("unhosted", 0))
        if seen is None and c.get("unhosted", 0) > 0:
            seen = time.time() - t
        if seen is not None and c.get("unhosted", 0) == expect:
            stable = time.time() - t
        time.sleep(0.1)
    _, v = http_json(watch, "GET", "/metrics")
    gauge = next((l for l in str(v).splitlines() if l.startswith("idpool_fleet_unhosted_identities ")), "")
    _, fv = http_json(watch, "POST", "/api/v1/tools/pool_status", {"fleet": True})
    listed = fv.get("fleet", {}).get("unhosted", {}) if isinstance(fv, dict) else {}
    name = victims[0][0]
    own = sum(1 for u in listed.get("listed", []) if u.get("fleet_id", "").startswith(name + "/"))
    # The first victim comes back.
    name, port, _ = victims[0]
    i = int(name[1:])
    t_restart = time.time()
    back = fleet.launch(i)
    fleet.daemons[fleet.daemons.index(victims[0])] = back
    wait_for(lambda: http_json(port, "GET", "/readyz")[0] == 200, 120, f"{name} ready again")
    ready_after = time.time() - t_restart
    taken = None
    while time.time() - t_restart < 6 * fleet.ttl:
        if fleet.cluster(watch).get("unhosted", 0) <= expect - own:
            taken = time.time() - t_restart
            break
        time.sleep(0.1)
    r = {"killed": kill, "identities_lost": lost, "spare_slots_left": spare_room, "lease_ttl_s": fleet.ttl,
         "unhosted_seen_after_s": seen and round(seen, 2), "unhosted_settled_after_s": stable and round(stable, 2),
         "unhosted_settled": expect if stable else peak, "metrics_gauge": gauge,
         "listed_in_fleet_view": listed.get("count"),
         "restarted_own_unhosted": own,
         "restarted_ready_after_s": round(ready_after, 2),
         "restarted_took_its_own_after_s": taken and round(taken, 2),
         "restarted_holds": len(fleet.held(port)),
         "unhosted_after_restart": fleet.cluster(watch).get("unhosted")}
    log(json.dumps(r))
    return r


def tb_mode(mode):
    code, v = http_json(TB_HTTP, "POST", "/__control/mode", mode)
    if code != 200:
        raise SystemExit(f"fleet-bench: testbed mode {mode}: {code} {v}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/release"))
    ap.add_argument("--calls", type=int, default=20000, help="the closed-loop run's calls")
    ap.add_argument("--quick", action="store_true", help="small runs (a smoke test of the bench)")
    ap.add_argument("--daemons", type=int, help="only the scale run: this many daemons, started together")
    ap.add_argument("--identities", type=int, default=200, help="the scale run's identities per daemon")
    a = ap.parse_args()
    bin_dir = pathlib.Path(a.bin)
    calls = 2000 if a.quick else a.calls
    work = ROOT / ".idpool/fleet-bench"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    procs = Procs()
    report = {}
    try:
        redis = Redis(procs, work)
        tb = procs.start([str(bin_dir / "idpool-testbed"), "--https", f"127.0.0.1:{TB_HTTPS}",
                          "--http", f"127.0.0.1:{TB_HTTP}", "--state-dir", str(work / "testbed")],
                         stdout=open(work / "testbed.out", "wb"), stderr=open(work / "testbed.log", "wb"))
        wait_for(lambda: b"ready" in (work / "testbed.out").read_bytes(), 20, "the testbed ready")
        del tb

        if a.daemons:
            report[f"{a.daemons}x{a.identities}"] = scale(procs, bin_dir, work, redis, a.daemons,
                                                          a.identities, 20 if a.quick else 40)
        else:
            standard(procs, bin_dir, work, redis, a, calls, report)
    finally:
        procs.end_all()
    out = work / "report.json"
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    log(f"report in {out}")


def standard(procs, bin_dir, work, redis, a, calls, report):
    """The scenarios docs/fleet.md quotes (see the module's notes)."""
    # 1. 10 x 4, 20 callers, bound 16 then 24.
    for bound in (16, 24):
        log(f"10 daemons x 4 identities, fleet in-flight bound {bound}")
        fleet = Fleet(procs, bin_dir, work, redis, 10, 4, bound)
        time.sleep(3)
        idle = idle_cost(redis, 5)
        n = calls if bound == 16 else max(calls // 5, 1000)
        r = measured_run(redis, fleet, 20, n, idle)
        r["idle_redis_per_sec"] = round(idle, 1)
        report[f"10x4_bound{bound}"] = r
        log(json.dumps(r))
        if bound == 24:
            # Its daemons go before the next fleet takes their names and ports.
            fleet.stop()
            redis.cli("FLUSHALL")
            break
        # 2. A site-wide limit of 10 requests/s (429, Retry-After: 1).
        secs = 20 if a.quick else 40
        r = site_limit(redis, fleet, 20, secs, idle)
        report["site_limit_10"] = r
        log(json.dumps(r))

        # 3. SIGKILL a daemon under load.
        log("SIGKILL of a daemon under load")
        victim = fleet.daemons[-1]
        others = [d for d in fleet.daemons if d is not victim]
        result = {}

        def watch():
            time.sleep(2)
            victim[2].send_signal(signal.SIGKILL)
            victim[2].wait()
            t = time.time()
            twice = set()
            freed = adopted = None
            while time.time() - t < 30 and (freed is None or adopted is None):
                places = sum(fleet.status(p)["strategies"]["testshop"]["in_flight"] for _, p, _ in others)
                if freed is None and places == 16:
                    freed = time.time() - t
                seen = []
                for _, p, _ in others:
                    seen += fleet.held(p)
                twice |= {x for x in seen if seen.count(x) > 1}
                if adopted is None and len(set(seen)) == 40:
                    adopted = time.time() - t
                time.sleep(0.05)
            result.update(places_free_after_s=freed and round(freed, 2),
                          adopted_after_s=adopted and round(adopted, 2), held_twice=sorted(twice))

        w = threading.Thread(target=watch)
        w.start()
        ok, failed, _, first = load([p for _, p, _ in others], 20, secs=20 if not a.quick else 14, tag="K")
        w.join()
        result.update(lease_ttl_s=5, calls_ok=ok, calls_failed=failed, first_failure=first)
        report["sigkill"] = result
        log(json.dumps(result))
        fleet.stop()
        redis.cli("FLUSHALL")

    # 4. 25 x 40 = 1,000 identities.
    if not a.quick:
        log("25 daemons x 40 identities")
        redis.cli("FLUSHALL")
        fleet = Fleet(procs, bin_dir, work, redis, 25, 40, 16)
        time.sleep(5)
        idle = idle_cost(redis, 15)
        r = measured_run(redis, fleet, 20, 1000, idle)
        r["idle_redis_per_sec"] = round(idle, 1)
        r["idle_per_identity_per_sec"] = round(idle / 1000, 4)
        report["25x40"] = r
        log(json.dumps(r))
        report["25x40_unhosted"] = unhosted_run(procs, bin_dir, work, redis, fleet, 3, idle)
        fleet.stop()


if __name__ == "__main__":
    main()
