#!/usr/bin/env node
// An agent's browser session through the official TypeScript SDK, over
// Streamable HTTP: browser_open -> browser_snapshot -> browser_type (submit)
// -> browser_snapshot -> browser_close, and a second key trying the same
// session id. Prints ONE JSON line on stdout (logs on stderr).
//
//   node browse.mjs --url http://127.0.0.1:PORT/mcp --key KEY --other-key KEY2 --page URL

import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const { values: opts } = parseArgs({
    options: {
        url: { type: 'string' },
        key: { type: 'string' },
        'other-key': { type: 'string' },
        page: { type: 'string' },
    },
});

function emit(obj, code) {
    process.stdout.write(JSON.stringify(obj) + '\n', () => process.exit(code));
}

async function connect(key) {
    const client = new Client({ name: 'idpool-browse-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(opts.url), {
        requestInit: { headers: { Authorization: `Bearer ${key}` } },
    });
    await client.connect(transport);
    return client;
}

async function call(client, name, args) {
    const r = await client.callTool({ name, arguments: args });
    if (r.isError) throw new Error(`${name}: ${r.content?.[0]?.text}`);
    return r.structuredContent;
}

function refOf(snapshot, role, name) {
    const want = `${role} ${JSON.stringify(name)}`;
    const line = snapshot.split('\n').find(l => l.trim().replace(/^- /, '').startsWith(want));
    if (!line) throw new Error(`no ${want} in\n${snapshot}`);
    return /\[ref=(e\d+)\]/.exec(line)[1];
}

async function main() {
    const agent = await connect(opts.key);
    const open = await call(agent, 'browser_open', { url: opts.page });
    const session = open.session;
    const first = await call(agent, 'browser_snapshot', { session });
    const box = refOf(first.snapshot, 'searchbox', 'Search the catalog');
    const typed = await call(agent, 'browser_type', { session, ref: box, text: 'kettle', submit: true });
    const after = await call(agent, 'browser_snapshot', { session });
    // Another key, same id: the session does not exist for it.
    const intruder = await connect(opts['other-key']);
    const other = await intruder.callTool({ name: 'browser_snapshot', arguments: { session } });
    await intruder.close();
    const closed = await call(agent, 'browser_close', { session });
    await agent.close();
    emit({
        session,
        slot: open.slot,
        firstTitle: first.title,
        typedUrl: typed.url,
        snapshot: after.snapshot,
        other: { isError: other.isError ?? false, text: other.content?.[0]?.text ?? '' },
        closed,
    }, 0);
}

main().catch(e => {
    console.error(e?.stack ?? e);
    emit({ error: e?.message ?? String(e) }, 1);
});
