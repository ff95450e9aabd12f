"""Drives `forge serve` with OpenEnv's own Python clients, unchanged.

usage: openenv_episode.py BASE_URL TASKS_JSONL

Runs task shop-02 of the example environment to its end with
`GenericEnvClient` (its gold actions, then the answer the user wants) and
checks the reward, then lists and calls tools with `MCPToolClient`. Prints
one JSON line per check; exits non-zero on the first failure.
"""

import json
import sys

from openenv.core import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}, default=str), flush=True)


def main():
    base, tasks_path = sys.argv[1], sys.argv[2]
    with open(tasks_path) as tasks:
        task = next(t for t in map(json.loads, tasks) if t["id"] == "shop-02")

    with GenericEnvClient(base_url=base).sync() as env:
        reset = env.reset(task_id="shop-02", seed=3)
        opening = reset.observation["metadata"]["messages"][0]["content"]
        assert opening == task["instruction"], opening
        tools = env.step({"type": "list_tools"}).observation["tools"]
        assert "send_message_to_user" in [tool["name"] for tool in tools]
        for action in task["gold_actions"]:
            result = env.step(
                {"type": "call_tool", "tool_name": action["name"], "arguments": action["arguments"]}
            )
            assert result.observation["error"] is None, result
            assert not result.done
        answer = "Here you are: " + ", ".join(task["required_outputs"])
        last = env.step(
            {"type": "call_tool", "tool_name": "send_message_to_user", "arguments": {"message": answer}}
        )
        assert last.done and last.reward == 1.0, last
        state = env.state()
        assert state["done"] and state["termination"] == "user_stop", state
        emit("generic_client_episode", reward=last.reward, steps=state["step_count"])

    with MCPToolClient(base_url=base).sync() as env:
        env.reset(task_id="shop-01")
        names = [tool.name for tool in env.list_tools()]
        assert "find_user_by_email" in names and "send_message_to_user" in names, names
        user = env.call_tool("find_user_by_email", email="ava.chen@example.com")
        assert user == {"user_id": "u1"}, user
        emit("mcp_tool_client", tools=len(names), result=user)


if __name__ == "__main__":
    main()
