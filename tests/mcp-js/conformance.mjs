#!/usr/bin/env node
// Runs MCP conformance scenarios against a Streamable HTTP endpoint and prints
// one summary line per scenario, then a closing "conformance: N passed, M failed"
// line. Exit 0 = all selected scenarios passed, 1 = at least one failed,
// 2 = usage/setup error.
//
//   node conformance.mjs --url http://127.0.0.1:PORT/mcp [--key KEY]
//        [--scenario NAME ...] [--strict] [--report FILE] [--out-dir DIR]
//        [--timeout-ms N] [--list]
//
// Scenario names are either official @modelcontextprotocol/conformance server
// scenarios (run through its CLI, results read from its checks.json) or the
// local "idpool-*" checks implemented below (things the pinned official
// suite does not test: MCP-Protocol-Version header validation, Origin-only
// validation, session handling). See CONFORMANCE.md.
//
// --key KEY: the official runner cannot send an Authorization header, so a
// tiny loopback proxy is started that adds `Authorization: Bearer KEY` to
// every request and forwards everything else verbatim (a Host/Origin that
// names the proxy is rewritten to name the real server; any other Host/Origin,
// e.g. evil.example.com, is passed through untouched).

import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync, existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import http from 'node:http';
import { parseArgs } from 'node:util';

const OFFICIAL_CLI = fileURLToPath(new URL('./node_modules/@modelcontextprotocol/conformance/dist/index.js', import.meta.url));

// Scenarios relevant to lifecycle / transport / header validation / DNS
// rebinding that need no special test tools on the server.
const DEFAULT_SCENARIOS = [
    'server-initialize',
    'ping',
    'tools-list',
    'server-sse-multiple-streams',
    'dns-rebinding-protection',
    'idpool-lifecycle-http',
    'idpool-protocol-version-header',
    'idpool-origin-validation',
    'idpool-session-handling'
];

const LOCAL_SCENARIOS = {
    'idpool-lifecycle-http': lifecycleHttp,
    'idpool-protocol-version-header': protocolVersionHeader,
    'idpool-origin-validation': originValidation,
    'idpool-session-handling': sessionHandling
};

const PV = '2025-11-25';
const log = (...a) => console.error('[conformance.mjs]', ...a);

// ---------------------------------------------------------------- raw HTTP

function rawRequest(url, { method = 'POST', headers = {}, body, timeoutMs = 10000 } = {}) {
    const u = new URL(url);
    return new Promise((resolve, reject) => {
        const req = http.request(
            { host: u.hostname.replace(/^\[|\]$/g, ''), port: u.port || 80, method, path: u.pathname + u.search, headers },
            res => {
                const chunks = [];
                const ct = String(res.headers['content-type'] ?? '');
                let done = false;
                const finish = () => {
                    if (done) return;
                    done = true;
                    clearTimeout(t);
                    const text = Buffer.concat(chunks).toString('utf8');
                    res.destroy();
                    resolve({ status: res.statusCode, headers: res.headers, text, json: parseBody(text, ct) });
                };
                res.on('data', c => {
                    chunks.push(c);
                    // An SSE response stays open; stop once a JSON-RPC response arrived.
                    if (ct.includes('text/event-stream') && /"(result|error)"\s*:/.test(Buffer.concat(chunks).toString('utf8'))) finish();
                });
                res.on('end', finish);
                res.on('error', finish);
                const t = setTimeout(finish, timeoutMs);
            }
        );
        req.on('error', reject);
        if (body !== undefined) req.write(typeof body === 'string' ? body : JSON.stringify(body));
        req.end();
    });
}

function parseBody(text, ct) {
    if (!text) return null;
    if (ct.includes('text/event-stream')) {
        for (const line of text.split(/\r?\n/)) {
            if (!line.startsWith('data:')) continue;
            try {
                const m = JSON.parse(line.slice(5).trim());
                if (m && (m.result !== undefined || m.error !== undefined)) return m;
            } catch {}
        }
        return null;
    }
    try {
        return JSON.parse(text);
    } catch {
        return null;
    }
}

function baseHeaders(ctx, extra = {}) {
    const h = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...extra };
    if (ctx.key) h.authorization = `Bearer ${ctx.key}`;
    for (const k of Object.keys(h)) if (h[k] === undefined) delete h[k];
    return h;
}

const initBody = id => ({
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: PV, capabilities: {}, clientInfo: { name: 'idpool-conformance-extra', version: '1.0.0' } }
});

async function initSession(ctx, extraHeaders = {}) {
    const r = await rawRequest(ctx.url, { headers: baseHeaders(ctx, extraHeaders), body: initBody(1) });
    const sid = r.headers['mcp-session-id'];
    const version = r.json?.result?.protocolVersion;
    return { r, sid: typeof sid === 'string' ? sid : undefined, version };
}

async function sendInitialized(ctx, sid, version) {
    return rawRequest(ctx.url, {
        headers: baseHeaders(ctx, { 'mcp-session-id': sid, 'mcp-protocol-version': version }),
        body: { jsonrpc: '2.0', method: 'notifications/initialized' }
    });
}

function check(id, status, description, errorMessage, details) {
    return { id, status, description, ...(errorMessage ? { errorMessage } : {}), ...(details ? { details } : {}) };
}

const is2xx = s => s >= 200 && s < 300;
const is4xx = s => s >= 400 && s < 500;

// ---------------------------------------------------------------- local scenarios

async function lifecycleHttp(ctx) {
    const out = [];
    const { r, sid, version } = await initSession(ctx);
    const ok = is2xx(r.status) && r.json?.result?.protocolVersion && r.json?.result?.serverInfo?.name && r.json?.result?.capabilities;
    out.push(check('initialize-result', ok ? 'SUCCESS' : 'FAILURE', 'POST initialize returns 2xx with protocolVersion, serverInfo.name, capabilities',
        ok ? undefined : `status ${r.status}, body ${r.text.slice(0, 300)}`, { status: r.status, sessionId: sid ?? null }));
    if (!ok) return out;
    out.push(check('initialize-version', version === PV ? 'SUCCESS' : 'WARNING', `server answers protocolVersion ${PV} when the client asks for it`,
        version === PV ? undefined : `server answered ${version}`));
    const n = await sendInitialized(ctx, sid, version);
    out.push(check('initialized-notification-202', n.status === 202 ? 'SUCCESS' : 'FAILURE',
        'POST notifications/initialized answered 202 Accepted (spec: accepted notification/response -> 202, no body)',
        n.status === 202 ? undefined : `got ${n.status}`, { status: n.status }));
    const bad = await rawRequest(ctx.url, {
        headers: baseHeaders(ctx, { 'mcp-session-id': sid, 'mcp-protocol-version': version }),
        body: '{"jsonrpc":"2.0","id":5,"method":"tools/list"'
    });
    const badOk = is4xx(bad.status) || (is2xx(bad.status) && bad.json?.error?.code === -32700);
    out.push(check('malformed-json', badOk ? 'SUCCESS' : 'FAILURE', 'malformed JSON body is rejected (4xx or JSON-RPC -32700), server stays up',
        badOk ? undefined : `got ${bad.status} ${bad.text.slice(0, 200)}`, { status: bad.status }));
    const g = await rawRequest(ctx.url, {
        method: 'GET',
        headers: baseHeaders(ctx, { accept: 'application/json', 'content-type': undefined, 'mcp-session-id': sid, 'mcp-protocol-version': version }),
        timeoutMs: 3000
    });
    out.push(check('get-without-sse-accept', is2xx(g.status) ? 'WARNING' : 'SUCCESS',
        'GET without Accept: text/event-stream is not served as a stream (405/406/4xx expected)', is2xx(g.status) ? `got ${g.status}` : undefined, { status: g.status }));
    return out;
}

async function protocolVersionHeader(ctx) {
    const out = [];
    const { r, sid, version } = await initSession(ctx);
    if (!is2xx(r.status) || !version) return [check('setup', 'FAILURE', 'initialize for header tests', `status ${r.status}: ${r.text.slice(0, 200)}`)];
    await sendInitialized(ctx, sid, version);
    let id = 10;
    const list = pv =>
        rawRequest(ctx.url, {
            headers: baseHeaders(ctx, { 'mcp-session-id': sid, ...(pv === null ? {} : { 'mcp-protocol-version': pv }) }),
            body: { jsonrpc: '2.0', id: id++, method: 'tools/list', params: {} }
        });
    const good = await list(version);
    out.push(check('negotiated-version-accepted', is2xx(good.status) && good.json?.result ? 'SUCCESS' : 'FAILURE',
        `tools/list with MCP-Protocol-Version: ${version} (negotiated) -> 2xx with result`, is2xx(good.status) ? undefined : `got ${good.status}`, { status: good.status }));
    for (const [cid, pv] of [['unsupported-version-400', '1999-01-01'], ['malformed-version-400', 'not-a-version']]) {
        const x = await list(pv);
        out.push(check(cid, x.status === 400 ? 'SUCCESS' : 'FAILURE', `tools/list with MCP-Protocol-Version: ${pv} -> HTTP 400 (spec MUST)`,
            x.status === 400 ? undefined : `got ${x.status}`, { status: x.status, body: x.json ?? x.text.slice(0, 200) }));
    }
    const none = await list(null);
    out.push(check('missing-version-accepted', is2xx(none.status) ? 'SUCCESS' : 'WARNING',
        'tools/list without MCP-Protocol-Version -> 2xx (spec SHOULD assume 2025-03-26 / negotiated version)', is2xx(none.status) ? undefined : `got ${none.status}`, { status: none.status }));
    const older = await list('2025-03-26');
    out.push(check('older-supported-version-accepted', is2xx(older.status) ? 'SUCCESS' : 'WARNING',
        'tools/list with MCP-Protocol-Version: 2025-03-26 -> 2xx (official server-sse-multiple-streams sends exactly this after negotiating 2025-11-25)',
        is2xx(older.status) ? undefined : `got ${older.status}`, { status: older.status }));
    return out;
}

async function originValidation(ctx) {
    const out = [];
    const host = new URL(ctx.url).host;
    const evil = 'evil.example.com';
    const cases = [
        ['bad-origin-valid-host-403', { host, origin: `http://${evil}` }, 'reject403', 'valid Host + Origin http://evil.example.com -> 403 (spec: invalid Origin MUST get 403)'],
        ['bad-host-no-origin-4xx', { host: evil }, 'reject', 'Host evil.example.com, no Origin -> 4xx'],
        ['bad-host-with-port-4xx', { host: `${evil}:${new URL(ctx.url).port || 80}` }, 'reject', 'Host evil.example.com:PORT (rebinding keeps the port) -> 4xx'],
        ['bad-origin-https-4xx', { host, origin: `https://${evil}` }, 'reject', 'valid Host + Origin https://evil.example.com -> 4xx'],
        ['localhost-origin-accepted', { host, origin: `http://localhost:${new URL(ctx.url).port || 80}` }, 'accept', 'valid Host + Origin http://localhost:PORT -> 2xx'],
        ['loopback-origin-accepted', { host, origin: `http://127.0.0.1:${new URL(ctx.url).port || 80}` }, 'accept', 'valid Host + Origin http://127.0.0.1:PORT -> 2xx'],
        ['no-origin-accepted', { host }, 'accept', 'valid Host, no Origin (non-browser client) -> 2xx']
    ];
    let id = 1;
    for (const [cid, h, expect, desc] of cases) {
        const r = await rawRequest(ctx.url, { headers: baseHeaders(ctx, h), body: initBody(id++) });
        let status;
        if (expect === 'accept') status = is2xx(r.status) ? 'SUCCESS' : 'FAILURE';
        else if (expect === 'reject403') status = r.status === 403 ? 'SUCCESS' : is4xx(r.status) ? 'WARNING' : 'FAILURE';
        else status = is4xx(r.status) ? 'SUCCESS' : 'FAILURE';
        out.push(check(cid, status, desc, status === 'SUCCESS' ? undefined : `got ${r.status}`, { headers: h, status: r.status }));
    }
    return out;
}

async function sessionHandling(ctx) {
    const out = [];
    const { r, sid, version } = await initSession(ctx);
    if (!is2xx(r.status)) return [check('setup', 'FAILURE', 'initialize for session tests', `status ${r.status}`)];
    if (!sid) return [check('stateless', 'INFO', 'server issued no Mcp-Session-Id (stateless): session checks not applicable')];
    await sendInitialized(ctx, sid, version);
    const list = (h, id) => rawRequest(ctx.url, { headers: baseHeaders(ctx, { 'mcp-protocol-version': version, ...h }), body: { jsonrpc: '2.0', id, method: 'tools/list', params: {} } });
    const vis = /^[\x21-\x7e]+$/.test(sid);
    out.push(check('session-id-visible-ascii', vis ? 'SUCCESS' : 'FAILURE', 'Mcp-Session-Id contains only visible ASCII (0x21-0x7E)', vis ? undefined : 'bad characters'));
    const noSid = await list({}, 20);
    out.push(check('missing-session-400', noSid.status === 400 ? 'SUCCESS' : is4xx(noSid.status) ? 'WARNING' : 'FAILURE',
        'non-initialize POST without Mcp-Session-Id -> 400 (spec SHOULD)', noSid.status === 400 ? undefined : `got ${noSid.status}`, { status: noSid.status }));
    const bogus = await list({ 'mcp-session-id': 'no-such-session-0000' }, 21);
    out.push(check('unknown-session-404', bogus.status === 404 ? 'SUCCESS' : 'FAILURE', 'POST with unknown Mcp-Session-Id -> 404 (spec MUST)',
        bogus.status === 404 ? undefined : `got ${bogus.status}`, { status: bogus.status }));
    const del = await rawRequest(ctx.url, { method: 'DELETE', headers: baseHeaders(ctx, { 'mcp-session-id': sid, 'mcp-protocol-version': version, 'content-type': undefined }) });
    if (del.status === 405) {
        out.push(check('delete-session', 'INFO', 'DELETE session answered 405 (server does not allow client-initiated termination; allowed by spec)'));
    } else if (is2xx(del.status)) {
        out.push(check('delete-session', 'SUCCESS', 'DELETE with Mcp-Session-Id terminates the session (2xx)'));
        const after = await list({ 'mcp-session-id': sid }, 22);
        out.push(check('deleted-session-404', after.status === 404 ? 'SUCCESS' : 'FAILURE', 'POST with a terminated session id -> 404 (spec MUST)',
            after.status === 404 ? undefined : `got ${after.status}`, { status: after.status }));
    } else {
        out.push(check('delete-session', 'FAILURE', 'DELETE with Mcp-Session-Id -> 2xx or 405', `got ${del.status}`));
    }
    return out;
}

// ---------------------------------------------------------------- auth proxy

function startAuthProxy(targetUrl, key) {
    const target = new URL(targetUrl);
    const hostname = target.hostname.replace(/^\[|\]$/g, '');
    return new Promise((resolve, reject) => {
        const srv = http.createServer((req, res) => {
            const proxyHost = `${target.hostname}:${srv.address().port}`;
            const headers = { ...req.headers };
            if (headers.host === proxyHost) headers.host = target.host;
            if (headers.origin === `http://${proxyHost}`) headers.origin = `${target.protocol}//${target.host}`;
            if (!headers.authorization) headers.authorization = `Bearer ${key}`;
            const up = http.request({ host: hostname, port: target.port || 80, method: req.method, path: req.url, headers }, ur => {
                const h = { ...ur.headers };
                delete h.connection;
                delete h['keep-alive'];
                delete h['transfer-encoding'];
                res.writeHead(ur.statusCode, h);
                res.flushHeaders();
                ur.pipe(res);
            });
            up.on('error', e => {
                if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
                res.end(`proxy error: ${e.message}`);
            });
            res.on('close', () => up.destroy());
            req.pipe(up);
        });
        srv.on('error', reject);
        srv.listen(0, hostname, () => {
            const u = new URL(targetUrl);
            u.port = String(srv.address().port);
            resolve({ url: u.toString(), close: () => srv.close() });
        });
    });
}

// ---------------------------------------------------------------- official runner

function runOfficial(url, scenario, outDir, timeoutMs) {
    return new Promise(resolve => {
        const child = spawn(process.execPath, [OFFICIAL_CLI, 'server', '--url', url, '--scenario', scenario, '-o', outDir], {
            stdio: ['ignore', 'pipe', 'pipe'],
            env: { ...process.env, NO_COLOR: '1' }
        });
        child.stdout.on('data', d => process.stderr.write(d));
        child.stderr.on('data', d => process.stderr.write(d));
        const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
        child.on('close', code => {
            clearTimeout(t);
            const dir = existsSync(outDir) ? readdirSync(outDir).filter(n => n.startsWith(`server-${scenario}-`)).sort().pop() : undefined;
            let checks = null;
            if (dir) {
                try {
                    checks = JSON.parse(readFileSync(join(outDir, dir, 'checks.json'), 'utf8'));
                } catch {}
            }
            resolve({ exitCode: code, checks, checksFile: dir ? join(outDir, dir, 'checks.json') : null });
        });
    });
}

// ---------------------------------------------------------------- main

async function main() {
    let values;
    try {
        ({ values } = parseArgs({
            strict: true,
            options: {
                url: { type: 'string' },
                key: { type: 'string' },
                scenario: { type: 'string', multiple: true },
                strict: { type: 'boolean', default: false },
                report: { type: 'string' },
                'out-dir': { type: 'string' },
                'timeout-ms': { type: 'string', default: '120000' },
                list: { type: 'boolean', default: false }
            }
        }));
    } catch (e) {
        console.error(e.message);
        process.exit(2);
    }
    if (values.list) {
        console.log(`default: ${DEFAULT_SCENARIOS.join(' ')}`);
        console.log(`local: ${Object.keys(LOCAL_SCENARIOS).join(' ')}`);
        console.log('official: see `npx conformance list --server`');
        return 0;
    }
    if (!values.url) {
        console.error('usage: node conformance.mjs --url http://127.0.0.1:PORT/mcp [--key KEY] [--scenario NAME ...] [--strict] [--report FILE] [--out-dir DIR]');
        return 2;
    }
    const scenarios = (values.scenario?.length ? values.scenario.flatMap(s => s.split(',')) : DEFAULT_SCENARIOS).map(s => s.trim()).filter(Boolean);
    const timeoutMs = Number(values['timeout-ms']) || 120000;
    const outDir = values['out-dir'] ?? mkdtempSync(join(tmpdir(), 'mcp-conformance-'));
    mkdirSync(outDir, { recursive: true });
    const ctx = { url: values.url, key: values.key };

    let proxy = null;
    if (values.key && scenarios.some(s => !LOCAL_SCENARIOS[s])) {
        proxy = await startAuthProxy(values.url, values.key);
        log(`auth proxy ${proxy.url} -> ${values.url}`);
    }

    const results = [];
    for (const name of scenarios) {
        let checks = null;
        let note = '';
        if (LOCAL_SCENARIOS[name]) {
            try {
                checks = await LOCAL_SCENARIOS[name](ctx);
            } catch (e) {
                checks = [check(name, 'FAILURE', 'scenario crashed', e?.message ?? String(e))];
            }
        } else {
            const r = await runOfficial(proxy ? proxy.url : values.url, name, outDir, timeoutMs);
            checks = r.checks;
            if (!checks) {
                checks = [check(name, 'FAILURE', 'official runner produced no checks.json', `exit code ${r.exitCode} (unknown scenario or crash; see stderr)`)];
            }
            note = r.checksFile ?? '';
        }
        const passed = checks.filter(c => c.status === 'SUCCESS').length;
        const failed = checks.filter(c => c.status === 'FAILURE').length;
        const warnings = checks.filter(c => c.status === 'WARNING').length;
        const ok = failed === 0 && (!values.strict || warnings === 0);
        results.push({ scenario: name, official: !LOCAL_SCENARIOS[name], ok, passed, failed, warnings, checksFile: note || null, checks });
        console.log(`${ok ? 'PASS' : 'FAIL'} ${name}: ${passed} passed, ${failed} failed, ${warnings} warnings`);
        for (const c of checks) {
            if (c.status === 'FAILURE' || c.status === 'WARNING') console.log(`    ${c.status} [${c.id}] ${c.description}${c.errorMessage ? ` -- ${c.errorMessage}` : ''}`);
        }
    }
    proxy?.close();

    const nOk = results.filter(r => r.ok).length;
    const nFail = results.length - nOk;
    if (values.report) writeFileSync(values.report, JSON.stringify({ url: values.url, passed: nOk, failed: nFail, scenarios: results }, null, 2));
    console.log(`conformance: ${nOk} passed, ${nFail} failed`);
    return nFail === 0 ? 0 : 1;
}

main().then(
    code => process.exit(code),
    e => {
        console.error(e);
        process.exit(2);
    }
);
