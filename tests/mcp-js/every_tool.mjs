#!/usr/bin/env node
// Every tool called once over Streamable HTTP with the TypeScript SDK (1.x),
// its real result validated against its own outputSchema by Ajv 2020 in
// strict mode (the SDK checks it too, on every callTool).
//
//   node every_tool.mjs URL KEY PLAN
//
// PLAN is a JSON list of steps `{"tool": NAME, "args": {...}, "keep": {VAR:
// "/json/pointer"}}`, run in order. In args, a string "$VAR" is a kept
// value, and "$ref:TEXT" the ref of the first line with a ref of the last
// snapshot kept as `snapshot` that contains TEXT. Prints one JSON line:
//   {"listed": [names], "results": [{"tool", "ok", "problems": [...]} |
//                                    {"tool", "isError": true, "text"} |
//                                    {"tool", "error"}]}

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import Ajv2020 from 'ajv/dist/2020.js';

const [url, key, planJson] = process.argv.slice(2);
const plan = JSON.parse(planJson);
const vars = {};

const pointer = (v, p) =>
    p.split('/').slice(1).reduce((o, k) => (o == null ? undefined : o[k.replace(/~1/g, '/').replace(/~0/g, '~')]), v);

const refOf = (text) => {
    const line = String(vars.snapshot ?? '').split('\n').find((l) => l.includes(text) && /\[ref=e\d+\]/.test(l));
    const m = line && line.match(/\[ref=(e\d+)\]/);
    if (!m) throw new Error(`no snapshot line with ${text} in:\n${vars.snapshot}`);
    return m[1];
};

const fill = (v) => {
    if (typeof v === 'string' && v.startsWith('$ref:')) return refOf(v.slice(5));
    if (typeof v === 'string' && v.startsWith('$') && v.slice(1) in vars) return vars[v.slice(1)];
    if (Array.isArray(v)) return v.map(fill);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fill(x)]));
    return v;
};

const client = new Client({ name: 'idpool-every-tool', version: '1.0.0' });
const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
await client.connect(transport);
const { tools } = await client.listTools();
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
const results = [];
for (const step of plan) {
    let res;
    try {
        res = await client.callTool({ name: step.tool, arguments: fill(step.args ?? {}) }, undefined, {
            timeout: 180000,
        });
    } catch (e) {
        results.push({ tool: step.tool, error: String(e?.message ?? e) });
        continue;
    }
    if (res.isError) {
        results.push({ tool: step.tool, isError: true, text: res.content?.[0]?.text ?? null });
        continue;
    }
    const problems = [];
    const schema = byName[step.tool]?.outputSchema;
    if (schema == null) {
        problems.push('no outputSchema');
    } else {
        const ajv = new Ajv2020({ strict: true, allErrors: true });
        try {
            const validate = ajv.compile(schema);
            if (!validate(res.structuredContent)) problems.push(ajv.errorsText(validate.errors));
        } catch (e) {
            problems.push(`compile: ${e.message}`);
        }
    }
    for (const [name, p] of Object.entries(step.keep ?? {})) vars[name] = pointer(res.structuredContent, p);
    results.push({ tool: step.tool, ok: problems.length === 0, problems });
}
await client.close();
process.stdout.write(JSON.stringify({ listed: tools.map((t) => t.name), results }) + '\n');
process.exit(0);
