#!/usr/bin/env python3
"""Produce reference outputs from the original Python tau-bench / tau2-bench code.

This script contains no benchmark code: it imports the reference package from the
checkout given with --reference and drives it with the data under --data
(laid out like ../shared/benchmarks). For every task it replays the gold actions and
prints one JSON line with every tool output and hashes of the final database(s),
so that Forge's Rust re-implementation can be checked against the original.

Usage:
  tau_reference.py --reference /tmp/ref/tau-bench  --data DATA tau-bench/retail [--split test|train|dev] [--timings]
  tau_reference.py --reference /tmp/ref/tau-bench  --data DATA tau-bench/airline
  tau_reference.py --reference /tmp/ref/tau2-bench --data DATA tau2-bench/{mock,airline,retail,telecom,banking_knowledge} [--split NAME]
  tau_reference.py --reference /tmp/ref/tau2-bench --data DATA --gold-rewards tau2-bench/<domain> [--split NAME]
  tau_reference.py --reference /tmp/ref/tau2-bench --data DATA tau2-bench/banking_knowledge --grep PATTERN...

tau-bench line:
  {"task_id": "<split>/<index>", "actions": [{"name", "output"}...],
   "final_db_sha256": sha256(json.dumps(db, sort_keys, compact, ensure_ascii=False)),
   "data_hash": the reference Env.get_data_hash() of the final DB}
  Gold actions (transfer_to_human_agents included) go through the reference Env.step()
  on a fresh DB loaded by the reference's own load_data() (pointed at --data). The
  env's terminate_tools list is emptied while replaying so that step() never triggers
  calculate_reward() (which would reload and replay the DB itself); the observation
  string is unaffected.

tau2-bench line:
  {"task_id": <task id>, "actions": [{"name", "requestor", "output"}...],
   "final_db_sha256", "final_user_db_sha256" (null when the domain has no user DB),
   "db_hash", "user_db_hash" (the reference Environment.get_db_hash()/get_user_db_hash())}
  The gold environment is built as tau2's EnvironmentEvaluator does: fresh environment
  from the domain's get_environment() (banking_knowledge: with the "grep_only"
  retrieval variant and the task's read-log allowlist, see tau2_env_kwargs), set_state(initialization_data,
  initialization_actions, message_history), then every evaluation_criteria action via
  Environment.make_tool_call (no sync_tools in between). Outputs are
  Environment.to_json_str(result), or "Error: {e}" when the call raises (as
  Environment.get_response renders it). The sha256 fields use
  json.dumps(model_dump(), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
  default=str) (default=str as in the reference hash, for date/datetime fields).

tau2-bench with --gold-rewards (tau_reference.py ... --gold-rewards tau2-bench/<domain>):
  {"task_id": <task id>, "reward": <float>, "reward_breakdown": {"DB": 1.0, ...}}
  The reward the reference's evaluator gives a gold run. For each task the trajectory a
  gold run produces is built as the orchestrator builds it: a fresh environment from the
  registry's constructor for the domain, set_state(initialization_data,
  initialization_actions, message_history) and sync_tools(); the trajectory starts with
  the task's message_history (or, without one, the orchestrator's
  DEFAULT_FIRST_AGENT_MESSAGE); then every evaluation_criteria action as a tool-call
  message (requestor assistant: AssistantMessage, user: UserMessage, one ToolCall each)
  followed by the ToolMessage that Environment.get_response gives on that live
  environment (which syncs after each call); then a final assistant text message, the
  closing Forge's gold policy says: "All done." or, when COMMUNICATE is in the task's
  reward_basis and it has communicate_info, "All done. Here is what you asked for:
  {'; '.join(communicate_info)}.". The run ends with AGENT_STOP and is scored by
  tau2.evaluator.evaluator.evaluate_simulation with EvaluationType.ALL (half duplex, not
  solo) on a copy of the task whose reward_basis lacks NL_ASSERTION: that check needs an
  LLM judge, so it is left out of the product and reported as "NL_ASSERTION":
  "not_evaluated" in reward_breakdown. A task whose evaluation raises gets "reward": null
  and "error": the exception's text.

Only the Python standard library is needed for tau-bench apart from pydantic (used by
tau_bench.types); tau2-bench needs its runtime deps (pydantic, loguru, addict, deepdiff,
python-dotenv, toml, PyYAML, docstring-parser), and --gold-rewards also pandas, numpy and
httpx (the evaluator module imports the reference's registry, which imports its agents and
user simulators); banking_knowledge also needs numpy, openai and requests (imported by
its retrieval pipelines, never called), and with --gold-rewards rich and rank_bm25. Heavy/LLM imports are never exercised: a stub `litellm` module (with the
submodules tau2 imports names from) is installed when litellm is not importable, and the
tau2 package __init__ (which imports the runner/agents/litellm) is bypassed.
"""

import argparse
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
import types

TAU_SPLITS = {"retail": ["test", "train", "dev"], "airline": ["test"]}
TAU_DB_FILES = {
    "retail": ["orders", "products", "users"],
    "airline": ["flights", "reservations", "users"],
}
TAU2_DOMAINS = ["mock", "airline", "retail", "telecom", "banking_knowledge"]


def canonical_sha256(obj, default=None):
    s = json.dumps(
        obj,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=default,
    )
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


DIGEST = False


def digest(line):
    """The compact form Forge's tests keep as fixtures: the tool names, the sha256 of
    the outputs (as the compact JSON array json.dumps(outputs, separators=(",", ":"),
    ensure_ascii=False)) and the final hashes."""
    outputs = [action["output"] for action in line["actions"]]
    text = json.dumps(outputs, separators=(",", ":"), ensure_ascii=False)
    compact = {
        "task_id": line["task_id"],
        "names": [action["name"] for action in line["actions"]],
        "outputs_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "final_db_sha256": line["final_db_sha256"],
    }
    if line.get("final_user_db_sha256") is not None:
        compact["final_user_db_sha256"] = line["final_user_db_sha256"]
    return compact


def emit(line):
    if DIGEST:
        line = digest(line)
    sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")


def install_litellm_stub():
    if "litellm" in sys.modules or importlib.util.find_spec("litellm") is not None:
        return
    stub = types.ModuleType("litellm")

    def _no_llm(*args, **kwargs):
        raise RuntimeError("litellm stub: no LLM calls in tau_reference.py")

    stub.completion = _no_llm
    stub.completion_cost = _no_llm
    stub.cost_per_token = _no_llm
    # Called when tau2.utils.llm_utils is imported (LLM cache off/on).
    stub.disable_cache = lambda *args, **kwargs: None
    stub.enable_cache = lambda *args, **kwargs: None
    sys.modules["litellm"] = stub
    # tau2.utils.llm_utils (imported by the registry's agents, for --gold-rewards)
    # imports names from these submodules; none of them is used.
    names = {
        "litellm.caching": [],
        "litellm.caching.caching": ["Cache"],
        "litellm.main": ["ModelResponse", "Usage"],
    }
    for name, classes in names.items():
        module = types.ModuleType(name)
        module.__path__ = []
        for cls in classes:
            setattr(module, cls, type(cls, (), {}))
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, module)


# --------------------------------------------------------------------------- tau-bench


def run_tau(args, domain):
    ref = os.path.abspath(args.reference)
    if not os.path.isdir(os.path.join(ref, "tau_bench")):
        sys.exit(f"--reference {ref} has no tau_bench/ package")
    data_dir = os.path.join(os.path.abspath(args.data), "tau-bench", domain)
    sys.path.insert(0, ref)
    install_litellm_stub()

    data_mod = importlib.import_module(f"tau_bench.envs.{domain}.data")
    # The reference loader reads <FOLDER_PATH>/<name>.json at call time: point it at --data.
    data_mod.FOLDER_PATH = data_dir
    from tau_bench.envs import get_env
    from tau_bench.types import Action, Task

    splits = [args.split] if args.split else TAU_SPLITS[domain]
    for split in splits:
        if split not in TAU_SPLITS[domain]:
            sys.exit(f"tau-bench/{domain} has no split {split!r}")
        env = get_env(
            domain,
            # "human": the only user strategy whose constructor makes no LLM call;
            # the user simulator is never used (no respond actions are replayed).
            user_strategy="human",
            user_model="gpt-4o",
            task_split=split,
            user_provider=None,
            task_index=0,
        )
        with open(os.path.join(data_dir, f"tasks_{split}.json"), encoding="utf-8") as f:
            raw_tasks = json.load(f)
        tasks = [Task.model_validate(t) for t in raw_tasks]
        # Cross-check the JSON conversion against the reference's own task list.
        ref_dump = [json.dumps(t.model_dump()) for t in env.tasks]
        our_dump = [json.dumps(t.model_dump()) for t in tasks]
        if ref_dump != our_dump:
            bad = [i for i, (a, b) in enumerate(zip(ref_dump, our_dump)) if a != b]
            print(
                f"WARNING: tau-bench/{domain} {split}: --data tasks differ from the "
                f"reference's tasks_{split}.py (counts {len(ref_dump)} vs {len(our_dump)}; "
                f"differing indices {bad[:20]})",
                file=sys.stderr,
            )

        saved_terminate = list(env.terminate_tools)
        env.terminate_tools = []  # never trigger calculate_reward() inside step()
        load_times, step_times = [], []
        hash_time = None
        for index, task in enumerate(tasks):
            # What Env.reset() does, minus the LLM user simulator.
            env.task_index = index
            t0 = time.perf_counter()
            env.data = env.data_load_func()
            load_times.append(time.perf_counter() - t0)
            env.task = task
            env.actions = []
            if hash_time is None:
                t0 = time.perf_counter()
                env.get_data_hash()
                hash_time = time.perf_counter() - t0
            outputs = []
            for gold in task.actions:
                action = Action(name=gold.name, kwargs=gold.kwargs)
                t0 = time.perf_counter()
                resp = env.step(action)
                step_times.append(time.perf_counter() - t0)
                outputs.append({"name": gold.name, "output": resp.observation})
            emit(
                {
                    "task_id": f"{split}/{index}",
                    "actions": outputs,
                    "final_db_sha256": canonical_sha256(env.data),
                    "data_hash": env.get_data_hash(),
                }
            )
        env.terminate_tools = saved_terminate
        sys.stdout.flush()
        if args.timings:
            # A plain json.load of the three files, as the reference loader does.
            plain = []
            for _ in range(min(len(tasks), 20)):
                t0 = time.perf_counter()
                db = {}
                for name in TAU_DB_FILES[domain]:
                    with open(os.path.join(data_dir, f"{name}.json")) as f:
                        db[name] = json.load(f)
                plain.append(time.perf_counter() - t0)
            mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")
            print(
                f"TIMINGS tau-bench/{domain} {split}: tasks={len(tasks)} "
                f"load_data mean={mean(load_times) * 1e3:.3f} ms "
                f"(plain json.load x{len(plain)} mean={mean(plain) * 1e3:.3f} ms); "
                f"tool calls={len(step_times)} mean Env.step={mean(step_times) * 1e6:.1f} us; "
                f"get_data_hash(initial DB)={hash_time * 1e3:.3f} ms",
                file=sys.stderr,
            )


# --------------------------------------------------------------------------- tau2-bench


def run_tau2(args, domain):
    ref = os.path.abspath(args.reference)
    src = None
    for cand in (os.path.join(ref, "src", "tau2"), os.path.join(ref, "tau2")):
        if os.path.isdir(cand):
            src = cand
            break
    if src is None:
        sys.exit(f"--reference {ref} has no src/tau2 package")
    data_root = os.path.join(os.path.abspath(args.data), "tau2-bench")

    # tau2 reads DATA_DIR/tau2/domains/<domain>/...; --data has <domain>/ directly.
    tmp = tempfile.mkdtemp(prefix="tau2data-")
    try:
        os.makedirs(os.path.join(tmp, "tau2"))
        os.symlink(data_root, os.path.join(tmp, "tau2", "domains"))
        sim = os.path.join(data_root, "user_simulator")
        if os.path.isdir(sim):
            os.symlink(sim, os.path.join(tmp, "tau2", "user_simulator"))
        os.environ["TAU2_DATA_DIR"] = tmp
        _run_tau2(args, domain, src)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_tau2(args, domain, src):
    # Bypass tau2/__init__.py (it imports runner/agents/litellm): a bare package
    # module whose __path__ points at the reference sources.
    pkg = types.ModuleType("tau2")
    pkg.__path__ = [src]
    sys.modules["tau2"] = pkg
    install_litellm_stub()
    try:
        from loguru import logger

        logger.remove()
        logger.add(sys.stderr, level="ERROR")
    except ImportError:
        pass

    env_mod = importlib.import_module(f"tau2.domains.{domain}.environment")
    from tau2.environment.environment import Environment

    # The registry maps "telecom" to get_environment_manual_policy (= the default).
    make_env = env_mod.get_environment
    if args.grep:
        run_grep(args.grep, make_env(retrieval_variant="grep_only"))
        return
    tasks = env_mod.get_tasks(args.split) if args.split else env_mod.get_tasks(None)
    if args.gold_rewards:
        run_tau2_gold_rewards(args, domain, tasks)
        return

    t_start = time.perf_counter()
    n_calls = 0
    for task in tasks:
        env = make_env(**tau2_env_kwargs(domain, task))
        init_data = init_actions = None
        history = []
        if task.initial_state is not None:
            init_data = task.initial_state.initialization_data
            init_actions = task.initial_state.initialization_actions
            if task.initial_state.message_history is not None:
                history = task.initial_state.message_history
        env.set_state(
            initialization_data=init_data,
            initialization_actions=init_actions,
            message_history=history,
            strict=True,
        )
        outputs = []
        gold = (
            task.evaluation_criteria.actions
            if task.evaluation_criteria is not None
            and task.evaluation_criteria.actions is not None
            else []
        )
        for action in gold:
            try:
                resp = env.make_tool_call(
                    tool_name=action.name,
                    requestor=action.requestor,
                    **action.arguments,
                )
                out = Environment.to_json_str(resp)
            except Exception as e:  # as Environment.get_response renders it
                out = f"Error: {e}"
            n_calls += 1
            outputs.append(
                {"name": action.name, "requestor": action.requestor, "output": out}
            )
        agent_db = env.tools.db if env.tools is not None else None
        user_db = env.user_tools.db if env.user_tools is not None else None
        emit(
            {
                "task_id": task.id,
                "actions": outputs,
                "final_db_sha256": (
                    canonical_sha256(agent_db.model_dump(), default=str)
                    if agent_db is not None
                    else None
                ),
                "final_user_db_sha256": (
                    canonical_sha256(user_db.model_dump(), default=str)
                    if user_db is not None
                    else None
                ),
                "db_hash": env.get_db_hash(),
                "user_db_hash": env.get_user_db_hash(),
            }
        )
    sys.stdout.flush()
    if args.timings:
        dt = time.perf_counter() - t_start
        print(
            f"TIMINGS tau2-bench/{domain}: tasks={len(tasks)} gold calls={n_calls} "
            f"total={dt:.2f} s ({dt / max(len(tasks), 1) * 1e3:.2f} ms/task)",
            file=sys.stderr,
        )


def run_grep(patterns, env):
    """One line per pattern: {"pattern", "matches": {doc_id: count} (every
    document the reference's GrepRetriever counts a match in), "output_sha256"
    (of the grep tool's answer)}. The answer ranks documents with equal counts
    in the order the reference read its directory, so a test compares the
    counts, and the whole answer only where no tie decides the top ten."""
    import re

    contents = env.tools._grep_pipeline.state["doc_content_map"]
    for pattern in patterns:
        try:
            compiled = re.compile(pattern, re.IGNORECASE)
        except re.error:
            compiled = re.compile(re.escape(pattern), re.IGNORECASE)
        matches = {}
        # The retriever answers a blank pattern with nothing.
        for doc_id, content in contents.items() if pattern.strip() else []:
            found = len(compiled.findall(content))
            if found:
                matches[doc_id] = found
        output = env.tools.grep(pattern)
        print(
            json.dumps(
                {
                    "pattern": pattern,
                    "matches": dict(sorted(matches.items())),
                    "output_sha256": hashlib.sha256(output.encode()).hexdigest(),
                },
                ensure_ascii=False,
            )
        )


def tau2_env_kwargs(domain, task):
    """What the reference's runner passes a domain's environment constructor
    for `task` beyond its defaults (runner/build.py, `_build_env_kwargs`).

    banking_knowledge: the retrieval variant "grep_only" (a regex search of
    the documents; the other variants need embedding models or a shell
    sandbox), and the task's read-log allowlist: the discoverable tools its
    gold actions call, whose read-only calls are logged."""
    if domain != "banking_knowledge":
        return {}
    from tau2.runner.build import _derive_read_log_allowlist

    return {
        "retrieval_variant": "grep_only",
        "read_log_allowlist": _derive_read_log_allowlist(task),
    }


def run_tau2_gold_rewards(args, domain, tasks):
    """The reference evaluator's reward for each task's gold run (see the module doc)."""
    from copy import deepcopy

    from tau2.data_model.message import (
        AssistantMessage,
        ToolCall,
        UserMessage,
    )
    from tau2.data_model.simulation import SimulationRun, TerminationReason
    from tau2.data_model.tasks import RewardType
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
    from tau2.orchestrator.orchestrator import DEFAULT_FIRST_AGENT_MESSAGE
    from tau2.registry import registry

    make_env = registry.get_env_constructor(domain)
    t_start = time.perf_counter()
    for task in tasks:
        criteria = task.evaluation_criteria
        initial = task.initial_state
        history = []
        if initial is not None and initial.message_history is not None:
            history = deepcopy(initial.message_history)
        env = make_env(**tau2_env_kwargs(domain, task))
        env.set_state(
            initialization_data=initial.initialization_data if initial else None,
            initialization_actions=initial.initialization_actions if initial else None,
            message_history=history,
        )
        env.sync_tools()
        trajectory = list(history) if history else [deepcopy(DEFAULT_FIRST_AGENT_MESSAGE)]
        gold = criteria.actions if criteria is not None and criteria.actions else []
        for index, action in enumerate(gold):
            call = ToolCall(
                id=f"gold_{index}",
                name=action.name,
                arguments=deepcopy(action.arguments),
                requestor=action.requestor,
            )
            if action.requestor == "user":
                trajectory.append(UserMessage(role="user", tool_calls=[call]))
            else:
                trajectory.append(AssistantMessage(role="assistant", tool_calls=[call]))
            trajectory.append(env.get_response(call))
            env.sync_tools()  # as the orchestrator does after every step
        basis = list(criteria.reward_basis) if criteria is not None else []
        closing = "All done."
        if RewardType.COMMUNICATE in basis and criteria.communicate_info:
            closing = (
                "All done. Here is what you asked for: "
                + "; ".join(criteria.communicate_info)
                + "."
            )
        trajectory.append(AssistantMessage(role="assistant", content=closing))
        scored = task
        if RewardType.NL_ASSERTION in basis:
            scored = task.model_copy(deep=True)
            scored.evaluation_criteria.reward_basis = [
                b for b in basis if b != RewardType.NL_ASSERTION
            ]
        simulation = SimulationRun(
            id=f"gold-{task.id}",
            task_id=task.id,
            start_time="",
            end_time="",
            duration=0.0,
            termination_reason=TerminationReason.AGENT_STOP,
            messages=trajectory,
        )
        line = {"task_id": task.id}
        try:
            info = evaluate_simulation(
                simulation=simulation,
                task=scored,
                evaluation_type=EvaluationType.ALL,
                solo_mode=False,
                domain=domain,
                env_kwargs=tau2_env_kwargs(domain, task),
            )
        except Exception as e:  # reported, not fatal: the other tasks still count
            line.update({"reward": None, "error": f"{type(e).__name__}: {e}"})
        else:
            breakdown = {
                getattr(k, "value", k): v for k, v in (info.reward_breakdown or {}).items()
            }
            line.update({"reward": info.reward, "reward_breakdown": breakdown})
        if RewardType.NL_ASSERTION in basis:
            line.setdefault("reward_breakdown", {})[RewardType.NL_ASSERTION.value] = (
                "not_evaluated"
            )
        sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    if args.timings:
        dt = time.perf_counter() - t_start
        print(
            f"TIMINGS tau2-bench/{domain} --gold-rewards: tasks={len(tasks)} "
            f"total={dt:.2f} s ({dt / max(len(tasks), 1) * 1e3:.2f} ms/task)",
            file=sys.stderr,
        )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reference", required=True, help="reference checkout (tau-bench or tau2-bench)")
    p.add_argument("--data", required=True, help="benchmark data root (e.g. ../shared/benchmarks)")
    p.add_argument("--split", help="task split (tau-bench: test/train/dev; tau2: split_tasks.json name)")
    p.add_argument("--timings", action="store_true", help="print timings to stderr")
    p.add_argument(
        "--digest",
        action="store_true",
        help="print each task as {task_id, names, outputs_sha256, final hashes} (Forge's test fixtures)",
    )
    p.add_argument(
        "--gold-rewards",
        action="store_true",
        help="tau2-bench: print each task's reward from the reference evaluator for a gold run",
    )
    p.add_argument(
        "--grep",
        nargs="+",
        metavar="PATTERN",
        help="tau2-bench/banking_knowledge: print each pattern's knowledge-base matches",
    )
    p.add_argument("suite", help="tau-bench/{retail,airline} or tau2-bench/{mock,airline,retail,telecom,banking_knowledge}")
    args = p.parse_args()
    global DIGEST
    DIGEST = args.digest
    bench, _, domain = args.suite.partition("/")
    if args.gold_rewards and bench != "tau2-bench":
        sys.exit("--gold-rewards is for tau2-bench suites")
    if args.grep and args.suite != "tau2-bench/banking_knowledge":
        sys.exit("--grep is for tau2-bench/banking_knowledge")
    if bench == "tau-bench" and domain in TAU_SPLITS:
        run_tau(args, domain)
    elif bench == "tau2-bench" and domain in TAU2_DOMAINS:
        run_tau2(args, domain)
    else:
        sys.exit(f"unknown suite {args.suite!r}")


if __name__ == "__main__":
    main()
