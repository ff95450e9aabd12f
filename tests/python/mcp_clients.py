"""Lists and calls a Forge episode's tools with the official MCP Python SDK,
over Streamable HTTP and over stdio.

usage: mcp_clients.py MCP_URL FORGE_BINARY

Prints one JSON line per transport; exits non-zero on the first failure.
"""

import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


async def episode(read, write):
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        assert "Ava Chen" in (init.instructions or ""), init
        tools = [tool.name for tool in (await session.list_tools()).tools]
        assert "find_user_by_email" in tools and "send_message_to_user" in tools, tools
        found = await session.call_tool("find_user_by_email", {"email": "ava.chen@example.com"})
        assert not found.is_error and found.content[0].text == '{"user_id":"u1"}', found
        refused = await session.call_tool("get_order", {"order_id": "o999"})
        assert refused.is_error, refused
        done = await session.call_tool("send_message_to_user", {"message": "It has shipped."})
        assert done.content[-1].text.startswith("The episode is over: reward"), done
        return {"tools": len(tools), "last": done.content[-1].text}


async def main():
    url, forge = sys.argv[1], sys.argv[2]
    async with streamable_http_client(url + "?task_id=shop-01") as (read, write):
        print(json.dumps({"transport": "streamable_http", **await episode(read, write)}), flush=True)
    params = StdioServerParameters(command=forge, args=["serve", "--stdio", "--task", "shop-01"])
    async with stdio_client(params) as (read, write):
        print(json.dumps({"transport": "stdio", **await episode(read, write)}), flush=True)


if __name__ == "__main__":
    anyio.run(main)
