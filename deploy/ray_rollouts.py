"""Rollouts against Forge environments from a Ray job, through OpenEnv's
client: each Ray task holds one session (a WebSocket) per episode.

    pip install "ray[default]" openenv-core
    forge serve --host 0.0.0.0 --port 8000 envs/library envs/clinic   # or the k8s Service
    python deploy/ray_rollouts.py --url http://forge-serve --episodes 64

`--local` runs the same rollouts without Ray (one process), for a quick
check. The agent here is a stand-in that calls each listed tool once with
empty arguments and then ends; put your policy (a vLLM endpoint, a trainer's
actor) in `act`.
"""

import argparse
import json

from openenv.core import GenericEnvClient

MESSAGE_TOOL = "send_message_to_user"


def act(observation, tools, turn):
    """The next action: a tool call, or (to end) a message to the user."""
    callable_tools = [tool for tool in tools if tool["name"] != MESSAGE_TOOL]
    if turn < len(callable_tools):
        return {"type": "call_tool", "tool_name": callable_tools[turn]["name"], "arguments": {}}
    return {"type": "call_tool", "tool_name": MESSAGE_TOOL, "arguments": {"message": "All done."}}


def rollout(url, seed, max_turns=30):
    """One episode of the task the seed picks; returns its summary."""
    with GenericEnvClient(base_url=url).sync() as env:
        result = env.reset(seed=seed)
        metadata = result.observation["metadata"]
        tools = env.step({"type": "list_tools"}).observation["tools"]
        for turn in range(max_turns):
            result = env.step(act(result.observation, tools, turn))
            if result.done:
                break
        state = env.state()
        return {
            "env": metadata["env"],
            "task_id": metadata["task_id"],
            "reward": result.reward,
            "steps": state["step_count"],
            "termination": state.get("termination"),
        }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--local", action="store_true", help="run without Ray")
    args = parser.parse_args()
    if args.local:
        results = [rollout(args.url, seed) for seed in range(args.episodes)]
    else:
        import ray

        ray.init()
        remote = ray.remote(rollout)
        results = ray.get([remote.remote(args.url, seed) for seed in range(args.episodes)])
    for result in results:
        print(json.dumps(result))
    rewards = [result["reward"] or 0.0 for result in results]
    print(json.dumps({"episodes": len(results), "mean_reward": sum(rewards) / len(rewards)}))


if __name__ == "__main__":
    main()
