#!/usr/bin/env node
// The load driver behind scripts/load.sh (and its shortened case in the
// suite): N concurrent MCP clients of the official TypeScript SDK, Streamable
// HTTP, legacy SSE and stdio bridges (`idpool mcp`) mixed, each making M calls
// of mixed tools against the testbed while faults are switched on at a steady
// rate. Every answer is judged against the testbed's ground truth
// (/__control/truth/ITEM): correct, or a tool error with a reason; anything
// else (a wrong result, a protocol error, a dropped transport) is a failure.
// Prints the report as text on stderr and one JSON line on stdout; exits 1
// when a figure does not hold.
//
//   node load.mjs --daemon http://127.0.0.1:8790 --testbed https://127.0.0.1:8443 \
//        --testbed-control http://127.0.0.1:8080 --pid PID --data-dir DIR \
//        --idpool BIN --config CFG [--clients 50] [--calls 100] [--soak SECS] [--slots 2]

import { parseArgs } from 'node:util';
import { readFileSync, readdirSync, readlinkSync, realpathSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';

const { values: o } = parseArgs({
    options: {
        daemon: { type: 'string' },
        testbed: { type: 'string' },
        'testbed-control': { type: 'string' },
        pid: { type: 'string' },
        'data-dir': { type: 'string' },
        idpool: { type: 'string' },
        config: { type: 'string' },
        clients: { type: 'string', default: '50' },
        calls: { type: 'string', default: '100' },
        soak: { type: 'string', default: '0' },
        slots: { type: 'string', default: '2' },
        'warmup-calls': { type: 'string', default: '6' },
    },
});
const CLIENTS = Number(o.clients);
const CALLS = Number(o.calls);
const SOAK_MS = Number(o.soak) * 1000;
const SLOTS = Number(o.slots);
const PID = Number(o.pid);
const log = (...a) => console.error(...a);

// --- the daemon's process, as /proc shows it --------------------------------
function procField(file, key) {
    const text = readFileSync(`/proc/${PID}/${file}`, 'utf8');
    const line = text.split('\n').find((l) => l.startsWith(key));
    return line ? Number(line.replace(key, '').trim().split(/\s+/)[0]) : NaN;
}
function sample() {
    return {
        rss_kib: procField('status', 'VmRSS:'),
        pss_kib: procField('smaps_rollup', 'Pss:'),
        fds: readdirSync(`/proc/${PID}/fd`).length,
        sockets: readdirSync(`/proc/${PID}/fd`).filter((f) => {
            try { return readlinkSync(`/proc/${PID}/fd/${f}`).startsWith('socket:'); } catch { return false; }
        }).length,
    };
}
// Chromium main processes on this daemon's slot profiles.
function chromiums() {
    const slots = `${realpathSync(o['data-dir'])}/slots/`;
    const found = [];
    for (const p of readdirSync('/proc')) {
        if (!/^\d+$/.test(p)) continue;
        let args;
        try { args = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0'); } catch { continue; }
        if (args.some((a) => a.startsWith('--type='))) continue;
        const dir = args.find((a) => a.startsWith('--user-data-dir='));
        if (!dir) continue;
        let real;
        try { real = realpathSync(dir.slice('--user-data-dir='.length)); } catch { continue; }
        if (real.startsWith(slots)) found.push(Number(p));
    }
    return found;
}

// --- the testbed --------------------------------------------------------------
const truthCache = new Map();
async function truth(item) {
    if (!truthCache.has(item)) {
        const r = await fetch(`${o['testbed-control']}/__control/truth/${item}`);
        if (!r.ok) throw new Error(`truth of ${item}: HTTP ${r.status}`);
        truthCache.set(item, await r.json());
    }
    return truthCache.get(item);
}
// Callers below security.pii_role see reviewers' names as initials.
const masked = (name) => name.split(/\s+/).filter(Boolean).map((w) => `${[...w][0]}***`).join(' ');
async function mode(patch) {
    await fetch(`${o['testbed-control']}/__control/mode`, { method: 'POST', body: JSON.stringify(patch) });
}
// A fault every half second, in turn: 5xx, slow, reset, truncation, 403 of
// the AJAX tier, a challenge wave, a rate limit.
const FAULTS = [
    { fault: { kind: 'error', path_prefix: '/ajax/', remaining: 2, status: 503 } },
    { fault: { kind: 'slow', path_prefix: '/product-reviews/', remaining: 3, delay_ms: 700 } },
    { fault: { kind: 'reset', path_prefix: '/ajax/', remaining: 1 } },
    { fault: { kind: 'truncate', path_prefix: '/product-reviews/', remaining: 1 } },
    { fault: { kind: 'error', path_prefix: '/ajax/', remaining: 2, status: 403 } },
    { fault: null, challenge: true },
    { challenge: false, rate_limit: { max: 25, window_secs: 2, block_secs: 2 } },
    { rate_limit: null, fault: null },
];
let faultsOn = true;
async function faultLoop() {
    let i = 0;
    while (faultsOn) {
        await mode(FAULTS[i % FAULTS.length]).catch(() => {});
        i++;
        await new Promise((r) => setTimeout(r, 500));
    }
    await mode({ fault: null, challenge: false, rate_limit: null }).catch(() => {});
}

// --- calls and their judgement ----------------------------------------------
const ITEMS = Array.from({ length: 12 }, (_, i) => `B0LOAD${i}`);
function plan(client, n) {
    const item = ITEMS[(client * 7 + n) % ITEMS.length];
    switch ((client + n) % 6) {
        case 0: case 1: case 2:
            return { tool: 'get_reviews', item, args: { item, strategy: 'testshop', page: 1 + (n % 2), pages: 1 } };
        case 3:
            return { tool: 'extract', item, args: { strategy: 'testshop', operation: 'product', params: { item } } };
        case 4:
            return { tool: 'scrape', item, args: { url: `${o.testbed}/product/${item}`, mode: n % 4 === 0 ? 'browser' : 'http', format: 'markdown' } };
        default:
            return { tool: 'pool_status', item, args: {} };
    }
}
async function judge(p, r) {
    if (r.isError) {
        const text = (r.content ?? []).map((c) => c.text ?? '').join(' ').trim();
        return text.length > 0 ? { cls: 'tool_error', reason: text.slice(0, 120) } : { cls: 'wrong', reason: 'a tool error without a reason' };
    }
    const sc = r.structuredContent ?? {};
    const t = await truth(p.item);
    switch (p.tool) {
        case 'get_reviews': {
            const page = p.args.page;
            const want = t.reviews.slice((page - 1) * 10, page * 10).map((x) => ({ ...x, author: masked(x.author) }));
            return JSON.stringify(sc.reviews) === JSON.stringify(want) ? { cls: 'ok' } : { cls: 'wrong', reason: `reviews of ${p.item} page ${page} differ from the ground truth` };
        }
        case 'extract':
            return sc.items?.[0]?.title === t.title ? { cls: 'ok' } : { cls: 'wrong', reason: `product title ${JSON.stringify(sc.items?.[0]?.title)} != ${t.title}` };
        case 'scrape':
            return typeof sc.content === 'string' && sc.content.includes(t.title) ? { cls: 'ok' } : { cls: 'wrong', reason: `scrape of ${p.item} lacks its title` };
        default:
            return Array.isArray(sc.slots) && sc.slots.length === SLOTS ? { cls: 'ok' } : { cls: 'wrong', reason: 'pool_status without its slots' };
    }
}

function transportFor(i) {
    switch (i % 3) {
        case 0: return ['http', new StreamableHTTPClientTransport(new URL(`${o.daemon}/mcp`))];
        case 1: return ['sse', new SSEClientTransport(new URL(`${o.daemon}/sse`))];
        default: return ['stdio', new StdioClientTransport({ command: o.idpool, args: ['--config', o.config, 'mcp'], stderr: 'ignore', env: { ...process.env, IDPOOL_URL: o.daemon } })];
    }
}

const results = { ok: 0, tool_error: 0, wrong: 0, protocol_error: 0 };
const latencies = {};
const reasons = {};
const failures = [];
async function runClient(i, calls, deadline, gate) {
    const [kind, transport] = transportFor(i);
    const client = new Client({ name: `load-${i}`, version: '1' });
    try {
        await client.connect(transport);
    } catch (e) {
        results.protocol_error++;
        failures.push(`client ${i} (${kind}) could not connect: ${e.message}`);
        return;
    }
    let n = 0;
    const one = async () => {
        const p = plan(i, n++);
        const t0 = performance.now();
        try {
            const r = await client.callTool({ name: p.tool, arguments: p.args }, undefined, { timeout: 180000 });
            const ms = performance.now() - t0;
            const v = await judge(p, r);
            results[v.cls]++;
            (latencies[p.tool] ??= []).push(ms);
            if (v.cls === 'tool_error') reasons[v.reason.replace(/[0-9]+/g, 'N').slice(0, 70)] = (reasons[v.reason.replace(/[0-9]+/g, 'N').slice(0, 70)] ?? 0) + 1;
            if (v.cls === 'wrong') failures.push(`client ${i} (${kind}) ${p.tool}: ${v.reason}`);
        } catch (e) {
            results.protocol_error++;
            failures.push(`client ${i} (${kind}) ${p.tool}: ${e.message}`);
        }
    };
    for (let k = 0; k < Number(o['warmup-calls']); k++) await one();
    await gate.arrive();
    if (SOAK_MS > 0) {
        while (Date.now() < deadline) await one();
    } else {
        for (let k = 0; k < calls; k++) await one();
    }
    try {
        if (kind === 'http') await transport.terminateSession();
        await client.close();
    } catch (e) {
        failures.push(`client ${i} (${kind}) close: ${e.message}`);
    }
}

function gateFor(n, onOpen) {
    let arrived = 0;
    let release;
    const opened = new Promise((r) => { release = r; });
    return {
        async arrive() {
            arrived++;
            if (arrived === n) { await onOpen(); release(); }
            await opened;
        },
    };
}

const pct = (xs, q) => {
    if (!xs.length) return null;
    const s = [...xs].sort((a, b) => a - b);
    return Math.round(s[Math.min(s.length - 1, Math.floor(q * s.length))]);
};

const start = sample();
let warm = null;
const started = Date.now();
const faults = faultLoop();
const gate = gateFor(CLIENTS, async () => {
    // Warm-up is over: every client connected and ran its first calls.
    warm = sample();
    warm.chromium = chromiums().length;
    log(`warm-up done: RSS ${warm.rss_kib} KiB, PSS ${warm.pss_kib} KiB, ${warm.fds} fds`);
});
const deadline = Date.now() + SOAK_MS;
await Promise.all(Array.from({ length: CLIENTS }, (_, i) => runClient(i, CALLS, deadline, gate)));
faultsOn = false;
await faults;
// The sessions and streams wind down; idle connections close after the
// daemon's header timeout.
await new Promise((r) => setTimeout(r, 12000));
const end = sample();
const browsers = chromiums();
const secs = (Date.now() - started) / 1000;

const perTool = Object.fromEntries(Object.entries(latencies).map(([t, xs]) => [t, { calls: xs.length, p50_ms: pct(xs, 0.5), p99_ms: pct(xs, 0.99) }]));
const figures = [
    ['zero protocol errors', results.protocol_error === 0, `${results.protocol_error}`],
    ['every call correct or a tool error with a reason', results.wrong === 0, `${results.wrong} wrong`],
    ['RSS at the end within 10% of after warm-up', end.rss_kib <= warm.rss_kib * 1.1, `${warm.rss_kib} -> ${end.rss_kib} KiB`],
    ['fds back to the warm-up count', end.fds <= warm.fds, `${warm.fds} -> ${end.fds}`],
    ['no Chromium beyond the pool\'s own', browsers.length <= SLOTS && warm.chromium > 0, `${browsers.length} running at the end (${warm.chromium} after warm-up), ${SLOTS} slots`],
];
log(`\n${CLIENTS} clients x ${SOAK_MS ? `${o.soak}s soak` : `${CALLS} calls`} in ${secs.toFixed(0)} s`);
log(`calls: ok ${results.ok}, tool errors ${results.tool_error}, wrong ${results.wrong}, protocol errors ${results.protocol_error}`);
for (const [r, n] of Object.entries(reasons).sort((a, b) => b[1] - a[1]).slice(0, 8)) log(`  tool error x${n}: ${r}`);
for (const [t, v] of Object.entries(perTool)) log(`  ${t.padEnd(12)} ${String(v.calls).padStart(6)} calls  p50 ${v.p50_ms} ms  p99 ${v.p99_ms} ms`);
log(`daemon: start RSS ${start.rss_kib} KiB PSS ${start.pss_kib} KiB fds ${start.fds}; warm ${warm.rss_kib} / ${warm.pss_kib} / ${warm.fds}; end ${end.rss_kib} / ${end.pss_kib} / ${end.fds}`);
log(`Chromium processes at the end: ${browsers.length} (${SLOTS} slots)`);
for (const f of failures.slice(0, 20)) log(`  FAILURE: ${f}`);
for (const [name, ok, detail] of figures) log(`${ok ? 'ok  ' : 'FAIL'} ${name}: ${detail}`);
const pass = figures.every((f) => f[1]);
process.stdout.write(JSON.stringify({ pass, clients: CLIENTS, calls: CALLS, soak_secs: Number(o.soak), secs, results, per_tool: perTool, start, warm, end, chromium: browsers.length, figures: figures.map(([n, ok, d]) => ({ name: n, ok, detail: d })), failures: failures.slice(0, 50) }) + '\n', () => process.exit(pass ? 0 : 1));
