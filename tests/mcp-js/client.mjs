#!/usr/bin/env node
// Minimal MCP client CLI used by idpool's Rust integration tests.
//
// It connects with the official TypeScript SDK over one of three transports,
// lists the tools, calls one tool, closes, and prints exactly ONE JSON line on
// stdout. Everything else (logs, child stderr) goes to stderr.
//
//   node client.mjs --transport stdio --command /path/bin --arg mcp --arg --embedded [--env K=V ...]
//   node client.mjs --transport http  --url http://127.0.0.1:PORT/mcp [--key KEY]
//   node client.mjs --transport sse   --url http://127.0.0.1:PORT/sse [--key KEY]
//
// Common flags: --tool NAME (default get_reviews), --tool-args JSON (default {}),
//               --progress, --timeout-ms N (default 120000)
//
// Success (exit 0):
//   {"protocolVersion":..,"serverName":..,"tools":[..],"toolsMeta":[{name,hasOutputSchema,annotations}],
//    "isError":bool,"structuredContent":..,"meta":<the result's _meta>,"text":..,"progress":[{progress,total,message}]}
// Failure (exit 1):
//   {"error":"<message>","code":<JSON-RPC error code or null>,"httpStatus":<HTTP status or null>}

import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport, SseError } from '@modelcontextprotocol/sdk/client/sse.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
// Ajv (the SDK's own dependency) in strict mode on JSON Schema 2020-12: the
// strictest of what clients use to check tool schemas.
import Ajv2020 from 'ajv/dist/2020.js';

const log = (...a) => console.error('[mcp-js client]', ...a);

/**
 * Every tool's input and output schema compiled by Ajv 2020 in strict mode
 * (no unknown keywords or formats, no union types but `[T, "null"]`, every
 * keyword under its type), every output property typed, and the called
 * tool's structured result validated against its output schema.
 */
function checkSchemas(tools, called, res) {
    const problems = [];
    const untyped = (schema, at) => {
        for (const [k, p] of Object.entries(schema?.properties ?? {})) {
            if (p.type === undefined && p.anyOf === undefined && p.oneOf === undefined && p.$ref === undefined) {
                problems.push(`${at}.${k}: no type`);
            }
            if (p.type === 'object') untyped(p, `${at}.${k}`);
            if (p.items?.type === 'object') untyped(p.items, `${at}.${k}[]`);
        }
    };
    // Input schemas carry no null type anywhere (model providers' tool
    // converters refuse type arrays or null types).
    const nulls = (v, at) => {
        if (Array.isArray(v)) { v.forEach((x, i) => nulls(x, `${at}[${i}]`)); return; }
        if (v === null || typeof v !== 'object') return;
        const t = v.type;
        if (t === 'null' || (Array.isArray(t) && t.includes('null'))) problems.push(`${at}: a null type in an input schema`);
        for (const [k, x] of Object.entries(v)) if (k !== 'enum' && k !== 'const' && k !== 'default') nulls(x, `${at}.${k}`);
    };
    for (const t of tools) {
        nulls(t.inputSchema, `${t.name}.inputSchema`);
        for (const [which, schema] of [['inputSchema', t.inputSchema], ['outputSchema', t.outputSchema]]) {
            if (schema == null) {
                problems.push(`${t.name}.${which}: missing`);
                continue;
            }
            const ajv = new Ajv2020({ strict: true, allErrors: true });
            let validate;
            try {
                validate = ajv.compile(schema);
            } catch (e) {
                problems.push(`${t.name}.${which}: ${e.message}`);
                continue;
            }
            if (which === 'outputSchema') {
                untyped(schema, `${t.name}.outputSchema`);
                if (t.name === called && res.structuredContent != null && !validate(res.structuredContent)) {
                    problems.push(`${t.name}: its result does not validate: ${ajv.errorsText(validate.errors)}`);
                }
            }
        }
    }
    return problems;
}

let printed = false;
function emit(obj, exitCode) {
    if (printed) return;
    printed = true;
    // stdout writes to pipes/files are synchronous on Linux; the callback makes
    // sure we never exit before the line is flushed.
    process.stdout.write(JSON.stringify(obj) + '\n', () => process.exit(exitCode));
}

function fail(err) {
    let message = err instanceof Error ? err.message : String(err);
    // fetch() failures hide the reason (ECONNREFUSED, ...) in err.cause.
    const cause = err instanceof Error ? err.cause : undefined;
    if (cause && (cause.code || cause.message)) message += ` (${cause.code ?? cause.message})`;
    let code = null;
    let httpStatus = null;
    if (err instanceof McpError) {
        code = err.code;
    } else if (err instanceof StreamableHTTPError || err instanceof SseError) {
        if (typeof err.code === 'number' && err.code >= 100) httpStatus = err.code;
    }
    if (httpStatus === null) {
        // SSEClientTransport reports POST failures only in the message.
        const m = /\(HTTP (\d{3})\)/.exec(message);
        if (m) httpStatus = Number(m[1]);
    }
    if (err instanceof Error && err.stack) log(err.stack);
    emit({ error: message || String(err), code, httpStatus }, 1);
}

function parseCli(argv) {
    const { values } = parseArgs({
        args: argv,
        strict: true,
        allowPositionals: false,
        options: {
            transport: { type: 'string' },
            command: { type: 'string' },
            arg: { type: 'string', multiple: true, default: [] },
            env: { type: 'string', multiple: true, default: [] },
            url: { type: 'string' },
            key: { type: 'string' },
            tool: { type: 'string', default: 'get_reviews' },
            'tool-args': { type: 'string', default: '{}' },
            progress: { type: 'boolean', default: false },
            'timeout-ms': { type: 'string', default: '120000' }
        }
    });
    const timeoutMs = Number(values['timeout-ms']);
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new Error(`invalid --timeout-ms: ${values['timeout-ms']}`);
    let toolArgs;
    try {
        toolArgs = JSON.parse(values['tool-args']);
    } catch (e) {
        throw new Error(`invalid --tool-args JSON: ${e.message}`);
    }
    if (toolArgs === null || typeof toolArgs !== 'object' || Array.isArray(toolArgs)) {
        throw new Error('--tool-args must be a JSON object');
    }
    const env = {};
    for (const kv of values.env) {
        const i = kv.indexOf('=');
        if (i <= 0) throw new Error(`invalid --env (expected K=V): ${kv}`);
        env[kv.slice(0, i)] = kv.slice(i + 1);
    }
    return { ...values, timeoutMs, toolArgs, envOverrides: env };
}

function makeTransport(opts) {
    switch (opts.transport) {
        case 'stdio': {
            if (!opts.command) throw new Error('--transport stdio requires --command');
            const env = {};
            for (const [k, v] of Object.entries(process.env)) if (typeof v === 'string') env[k] = v;
            Object.assign(env, opts.envOverrides);
            return new StdioClientTransport({
                command: opts.command,
                args: opts.arg,
                env,
                stderr: 'inherit' // child's stderr goes straight to our stderr
            });
        }
        case 'http': {
            if (!opts.url) throw new Error('--transport http requires --url');
            const headers = opts.key ? { Authorization: `Bearer ${opts.key}` } : {};
            return new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: { headers } });
        }
        case 'sse': {
            if (!opts.url) throw new Error('--transport sse requires --url');
            const headers = opts.key ? { Authorization: `Bearer ${opts.key}` } : {};
            // requestInit.headers is applied to the POSTs (and, in SDK >= 1.1x, merged
            // into the GET too via _commonHeaders). The eventSourceInit.fetch wrapper
            // sets the header on the GET /sse explicitly, independent of SDK version.
            return new SSEClientTransport(new URL(opts.url), {
                requestInit: { headers },
                eventSourceInit: {
                    fetch: (url, init) => {
                        const h = new Headers(init?.headers);
                        if (opts.key) h.set('Authorization', `Bearer ${opts.key}`);
                        return fetch(url, { ...init, headers: h });
                    }
                }
            });
        }
        default:
            throw new Error(`--transport must be one of stdio|http|sse (got ${opts.transport ?? 'nothing'})`);
    }
}

async function withTimeout(promise, ms, what) {
    let t;
    const timer = new Promise((_, reject) => {
        t = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    });
    try {
        return await Promise.race([promise, timer]);
    } finally {
        clearTimeout(t);
    }
}

async function main() {
    const opts = parseCli(process.argv.slice(2));
    const transport = makeTransport(opts);

    // The SDK does not expose the negotiated version on Client; it hands it to
    // transport.setProtocolVersion() (HTTP transports) right after initialize.
    // Wrap/define that hook to capture it for every transport (stdio has none).
    let protocolVersion = null;
    const origSet = typeof transport.setProtocolVersion === 'function' ? transport.setProtocolVersion.bind(transport) : null;
    transport.setProtocolVersion = v => {
        protocolVersion = v;
        if (origSet) origSet(v);
    };
    transport.onerror = e => {
        if (!closing) log('transport error:', e?.message ?? e);
    };

    const client = new Client({ name: 'idpool-mcp-js-test-client', version: '0.0.0' }, { capabilities: {} });
    const reqOpts = { timeout: opts.timeoutMs };
    try {
        await client.connect(transport, reqOpts);
        const serverName = client.getServerVersion()?.name ?? null;

        const allTools = [];
        let cursor;
        for (let page = 0; page < 100; page++) {
            const r = await client.listTools(cursor ? { cursor } : undefined, reqOpts);
            allTools.push(...r.tools);
            cursor = r.nextCursor;
            if (!cursor) break;
        }

        const progress = [];
        const callOpts = { ...reqOpts };
        if (opts.progress) {
            callOpts.onprogress = p => {
                progress.push({ progress: p.progress, total: p.total ?? null, message: p.message ?? null });
            };
            callOpts.resetTimeoutOnProgress = true;
            callOpts.maxTotalTimeout = opts.timeoutMs;
        }
        const res = await client.callTool({ name: opts.tool, arguments: opts.toolArgs }, undefined, callOpts);
        const firstText = Array.isArray(res.content) ? res.content.find(c => c && c.type === 'text') : undefined;
        const schemaProblems = checkSchemas(allTools, opts.tool, res);

        const out = {
            protocolVersion,
            serverName,
            tools: allTools.map(t => t.name),
            toolsMeta: allTools.map(t => ({
                name: t.name,
                hasOutputSchema: t.outputSchema != null,
                annotations: t.annotations ?? null
            })),
            isError: res.isError === true,
            structuredContent: res.structuredContent ?? null,
            meta: res._meta ?? null,
            text: firstText ? firstText.text : null,
            progress,
            schemaProblems
        };
        await closeQuietly(client);
        emit(out, 0);
    } catch (e) {
        await closeQuietly(client);
        throw e;
    }
}

let closing = false;
async function closeQuietly(client) {
    closing = true;
    try {
        await withTimeout(client.close(), 5000, 'close');
    } catch (e) {
        log('close failed:', e?.message ?? e);
    }
}

let overallMs = 120000;
{
    const i = process.argv.indexOf('--timeout-ms');
    const n = i >= 0 ? Number(process.argv[i + 1]) : NaN;
    if (Number.isFinite(n) && n > 0) overallMs = n;
}
// Hard backstop: connect + list + call + close must finish within timeout + 10 s.
setTimeout(() => fail(new Error(`client timed out after ${overallMs + 10000} ms`)), overallMs + 10000).unref();
process.on('unhandledRejection', e => fail(e));

main().catch(fail);
