// The TypeScript SDK's 2.x client (@modelcontextprotocol/client) in
// 2026-07-28 mode: connects with the protocol pinned, opens a
// `subscriptions/listen` stream for tool-list changes, and reports, one JSON
// line each: `connected`, `listening` (the filter the server honoured), then
// `tools_changed` with the strategies `extract` offers after the change, and
// `closed` with how the stream ended. Exits 0 after the first change, 2 when
// none came within LISTEN_WAIT_MS (default 30 s).
//
// node listen.mjs URL [KEY]

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, key] = process.argv.slice(2);
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const headers = key ? { Authorization: `Bearer ${key}` } : {};

const strategies = async (client) => {
  const { tools } = await client.listTools();
  const extract = tools.find((t) => t.name === "extract");
  return { tools: tools.length, strategies: extract?.inputSchema?.properties?.strategy?.enum ?? [] };
};

const client = new Client(
  { name: "idpool-listen", version: "1.0.0" },
  { versionNegotiation: { mode: { pin: "2026-07-28" } } },
);
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
await client.connect(transport);
say({ event: "connected", version: client.getNegotiatedProtocolVersion?.() ?? null });

let resolveChange;
const changed = new Promise((r) => (resolveChange = r));
client.setNotificationHandler("notifications/tools/list_changed", async () => {
  resolveChange(await strategies(client));
});

say({ event: "before", ...(await strategies(client)) });
const sub = await client.listen({ toolsListChanged: true });
say({ event: "listening", honored: sub.honoredFilter });

const wait = Number(process.env.LISTEN_WAIT_MS ?? 30000);
const timer = new Promise((r) => setTimeout(() => r(null), wait));
const after = await Promise.race([changed, timer]);
if (after === null) {
  say({ event: "timeout" });
  await sub.close();
  process.exit(2);
}
say({ event: "tools_changed", ...after });
await sub.close();
say({ event: "closed", how: await sub.closed });
await client.close();
process.exit(0);
