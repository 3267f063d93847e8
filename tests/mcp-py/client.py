#!/usr/bin/env python3
"""The official MCP Python SDK (`mcp` on PyPI) against idpool: initialize, list
the tools, call one, call `scrape` with a bad argument, close. Prints ONE JSON
line on stdout; logs on stderr. `--transport modern` is Streamable HTTP in the
2026-07-28 mode (the SDK's `Client` probing with `server/discover`).

    python client.py --transport http|sse|modern --url URL [--key KEY] --tool NAME --args JSON
"""

import argparse
import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.client import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


def dump(result):
    return {
        "isError": bool(result.is_error),
        "structuredContent": result.structured_content,
        "text": next((c.text for c in result.content if getattr(c, "type", "") == "text"), None),
    }


async def session_calls(read, write, tool, args):
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        tools = await session.list_tools()
        result = await session.call_tool(tool, args)
        bad = await session.call_tool("scrape", {"url": 12345})
        return {
            "protocolVersion": init.protocol_version,
            "serverName": init.server_info.name,
            "tools": [t.name for t in tools.tools],
            "result": dump(result),
            "bad": dump(bad),
        }


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--transport", choices=["http", "sse", "modern"], required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--key")
    p.add_argument("--tool", default="pool_status")
    p.add_argument("--args", default="{}")
    a = p.parse_args()
    headers = {"Authorization": f"Bearer {a.key}"} if a.key else {}
    args = json.loads(a.args)
    if a.transport == "modern":
        async with create_mcp_http_client(headers=headers) as http:
            transport = streamable_http_client(a.url, http_client=http)
            async with Client(transport, mode="auto") as client:
                tools = await client.list_tools()
                result = await client.call_tool(a.tool, args)
                bad = await client.call_tool("scrape", {"url": 12345})
                out = {
                    "protocolVersion": client.protocol_version,
                    "serverName": client.server_info.name if client.server_info else None,
                    "tools": [t.name for t in tools.tools],
                    "result": dump(result),
                    "bad": dump(bad),
                }
    elif a.transport == "http":
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(a.url, http_client=http) as (read, write):
                out = await session_calls(read, write, a.tool, args)
    else:
        async with sse_client(a.url, headers=headers) as (read, write):
            out = await session_calls(read, write, a.tool, args)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except BaseException as e:  # noqa: BLE001 - one JSON line whatever happened
        print(f"[mcp-py] {e!r}", file=sys.stderr)
        print(json.dumps({"error": repr(e)}), flush=True)
        sys.exit(1)
