"""k3d-gpu mcp driven by a client no one here wrote: the official MCP Python SDK.

Run by tests/mcp.rs (`python_client`), which sets up a private Docker engine, the k3d stub and
the fake Kubernetes API server, and passes them in the environment:

  MCP_TEST_BIN       the k3d-gpu binary
  MCP_TEST_ROOT     a fixture host directory
  MCP_TEST_CONFIG   a k3dgpu.toml whose cluster does not exist yet (the apply flows create it)

Read-only tools run in both protocol eras the SDK speaks: 2026-07-28 (`server/discover`,
the default) and the `initialize` handshake (`mode="legacy"`). Then the apply flows: a
stale hash, a client that cannot ask, a decline, a cancel, a confirmation replayed or moved
to other arguments, a call cancelled while k3d runs (nothing after it starts), and an
accept that runs the rest of the plan (after which the plan is empty).
"""

import asyncio
import hashlib
import json
import os
import sys

import anyio
from mcp import Client, MCPError, StdioServerParameters, types

BIN = os.environ["MCP_TEST_BIN"]
ROOT = os.environ["MCP_TEST_ROOT"]
CONFIG = os.environ.get("MCP_TEST_CONFIG")
READ_ONLY = [
    "facts",
    "validate",
    "plan",
    "observe",
    "agent",
    "agent_status",
    "recommend_placement",
    "cluster_health",
    "audit",
]


def server():
    # The SDK passes only a few variables by default; the engine, kubeconfig and k3d stub
    # are in the rest.
    return StdioServerParameters(command=BIN, args=["mcp"], env=dict(os.environ))


def answering(action, confirm=True, seen=None):
    async def callback(context, params):
        if seen is not None:
            seen.append(params)
        if action == "accept":
            return types.ElicitResult(action="accept", content={"confirm": confirm})
        return types.ElicitResult(action=action)

    return callback


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok: {what}")


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


async def wait_for(path, content, seconds=60):
    for _ in range(seconds * 50):
        if read(path) == content:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} never said {content!r}")


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def read_only(mode):
    async with Client(server(), mode=mode) as client:
        era = "2026-07-28" if mode == "auto" else "2025-11-25"
        check(client.protocol_version == era, f"[{mode}] negotiated {client.protocol_version}")
        tools = {t.name: t for t in (await client.list_tools()).tools}
        check(sorted(tools) == sorted(READ_ONLY + ["apply"]), f"[{mode}] tools listed: {sorted(tools)}")
        for name in READ_ONLY:
            t = tools[name]
            check(t.output_schema and t.output_schema.get("type") == "object", f"[{mode}] {name} has an output schema")
            check(t.annotations and t.annotations.read_only_hint is True, f"[{mode}] {name} is read-only")
        check(tools["apply"].annotations.destructive_hint is True, f"[{mode}] apply is marked destructive")

        # The SDK validates each structured result against the tool's output schema.
        facts = await client.call_tool("facts", {"root": ROOT})
        check(not facts.is_error, f"[{mode}] facts answered")
        active = [v["vendor"] for v in facts.structured_content["active"]]
        check("npu" in active and "intel" in active, f"[{mode}] facts: active vendors {active}")
        check(facts.structured_content["document"]["schema"] == "k3d-gpu.facts/v1", f"[{mode}] facts/v1 inside")

        validate = await client.call_tool("validate", {"config": CONFIG, "root": [ROOT]})
        check(validate.structured_content["passed"] is True, f"[{mode}] validate passed")

        agent = await client.call_tool("agent", {"config": CONFIG, "root": ROOT})
        a = agent.structured_content
        check(a["defaults"] is True and a["placement"]["backend"], f"[{mode}] agent placement {a['placement']['backend']}")
        check(a["endpoint"]["port_forward"].startswith("kubectl --context k3d-"), f"[{mode}] agent endpoint")

        plan = await client.call_tool("plan", {"config": CONFIG, "root": ROOT, "offline": True})
        exact, hash_text = plan.content[0].text, plan.content[1].text
        digest = "sha256:" + hashlib.sha256(exact.encode()).hexdigest()
        check(digest == hash_text == plan.structured_content["hash"], f"[{mode}] plan: the hash is of the exact bytes")
        check(plan.meta and plan.meta.get("k3d-gpu.io/planHash") == digest, f"[{mode}] plan: hash in _meta")
        check(json.loads(exact)["schema"] == "k3d-gpu.plan/v1", f"[{mode}] plan: plan/v1 bytes")

        observe = await client.call_tool("observe", {"config": CONFIG})
        check(observe.structured_content["exists"] is False, f"[{mode}] observe: no cluster yet")

        audit = await client.call_tool("audit", {"config": CONFIG})
        check(audit.is_error and "does not exist" in text_of(audit), f"[{mode}] audit: no cluster, with the fix")
        check("help:" in text_of(audit), f"[{mode}] audit: the error carries its help")

        advice = await client.call_tool("recommend_placement", {"config": CONFIG, "root": ROOT, "model_size": "4"})
        ad = advice.structured_content
        check(not advice.is_error and ad["needs_gib"] == 4.8, f"[{mode}] recommend_placement: 4 GiB needs 4.8")
        check(ad["recommended"] is not None and ad["candidates"], f"[{mode}] recommend_placement: a device holds it")

        health = await client.call_tool("cluster_health", {"config": CONFIG, "root": ROOT})
        check(health.is_error and "help:" in text_of(health), f"[{mode}] cluster_health: no cluster, with the fix")

        bad = await client.call_tool("facts", {"root": ROOT + "/nonexistent"})
        check(bad.is_error and "help:" in text_of(bad), f"[{mode}] a bad input is an error with its fix")
        try:
            await client.call_tool("facts", {"rooot": ROOT})
            check(False, "an unknown argument is refused")
        except MCPError as e:
            check(e.error.code == -32602, f"[{mode}] an unknown argument is invalid params")


async def live_hash(client):
    plan = await client.call_tool("plan", {"config": CONFIG, "root": ROOT})
    check(not plan.is_error, "live plan answered" + (": " + text_of(plan)[:500] if plan.is_error else ""))
    return plan.structured_content["hash"], plan.structured_content["empty"]


def refused_with_command(result, hash_, what):
    text = text_of(result)
    check(result.is_error and f"apply --plan-hash {hash_}" in text and "k3d-gpu" in text, what)


async def apply_flows():
    args = lambda h: {"config": CONFIG, "root": ROOT, "plan_hash": h}

    # A client that cannot ask the person.
    async with Client(server()) as client:
        hash_, empty = await live_hash(client)
        check(not empty, "the live plan creates the cluster")
        stale = "sha256:" + "0" * 64
        result = await client.call_tool("apply", args(stale))
        check(result.is_error and "not " + stale in text_of(result), "a stale hash is refused")
        result = await client.call_tool("apply", args(hash_))
        refused_with_command(result, hash_, "no elicitation: refused, naming the terminal command")

    for mode in ["auto", "legacy"]:
        for action in ["decline", "cancel"]:
            seen = []
            async with Client(server(), mode=mode, elicitation_callback=answering(action, seen=seen)) as client:
                result = await client.call_tool("apply", args(hash_))
                check(len(seen) == 1 and hash_ in seen[0].message, f"[{mode}] the person was shown the plan and hash")
                refused_with_command(result, hash_, f"[{mode}] {action}: refused, naming the terminal command")
        async with Client(server(), mode=mode, elicitation_callback=answering("accept", confirm=False)) as client:
            result = await client.call_tool("apply", args(hash_))
            refused_with_command(result, hash_, f"[{mode}] accept without the box ticked: refused")

    # A confirmation works once, and only for what it was given for (2026-07-28 round trip,
    # driven by hand).
    async with Client(server(), elicitation_callback=answering("decline")) as client:
        first = await client.session.call_tool("apply", args(hash_), allow_input_required=True)
        check(isinstance(first, types.InputRequiredResult), "the first call asks for input")
        key = next(iter(first.input_requests))
        no = {key: {"action": "decline"}}
        other = dict(args(hash_), allow_replace=True)
        moved = await client.session.call_tool("apply", other, input_responses=no, request_state=first.request_state)
        check(moved.is_error and "other arguments" in text_of(moved), "a confirmation moved to other arguments is refused")
        again = await client.session.call_tool("apply", args(hash_), input_responses=no, request_state=first.request_state)
        check(again.is_error and "already used" in text_of(again), "a confirmation works once")
        forged = await client.session.call_tool("apply", args(hash_), input_responses=no, request_state="f" * 64)
        check(forged.is_error and "unknown" in text_of(forged), "a made-up confirmation is refused")

    # Cancelled while k3d creates the cluster: no new action starts, k3d finishes, and only
    # then does the lock go.
    mark = os.path.join(os.path.dirname(CONFIG), "k3d-mark")
    os.environ.update(K3D_STUB_CREATE_DELAY="3", K3D_STUB_MARK=mark)
    try:
        async with Client(server(), elicitation_callback=answering("accept")) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "apply", args(hash_))
                await wait_for(mark, "started")
                tg.cancel_scope.cancel()
            check(read(mark) == "started", "cancelled while k3d runs")
            await wait_for(mark, "done")
            await asyncio.sleep(1)
    finally:
        del os.environ["K3D_STUB_CREATE_DELAY"], os.environ["K3D_STUB_MARK"]
    async with Client(server()) as client:
        observed = await client.call_tool("observe", {"config": CONFIG})
        check(observed.structured_content["exists"] is True, "after the cancel: k3d's cluster was finished")
        rest, empty = await live_hash(client)
        plan = await client.call_tool("plan", {"config": CONFIG, "root": ROOT})
        creates = [a for a in json.loads(plan.content[0].text)["actions"] if a["id"].startswith("k8s/")]
        check(not empty and rest != hash_ and creates, f"after the cancel: nothing else ran ({len(creates)} objects left)")
    hash_ = rest

    # Accept: the plan runs, through the CLI's gate, lock and verify.
    seen = []
    async with Client(server(), elicitation_callback=answering("accept", seen=seen)) as client:
        result = await client.call_tool("apply", args(hash_))
        out = result.structured_content
        check(not result.is_error and out["ok"] is True and out["hash"] == hash_, "accept: applied" + ("" if out["ok"] else ": " + text_of(result)[:500]))
        check(any(a.startswith("k8s/") for a in out["done"]), f"accept: the rest was applied ({len(out['done'])} actions)")
        after, empty = await live_hash(client)
        check(empty and after != hash_, "after apply the plan is empty")

    # The same gate with nothing to do, through the initialize handshake (elicitation/create).
    async with Client(server(), mode="legacy", elicitation_callback=answering("accept")) as client:
        result = await client.call_tool("apply", args(after))
        check(result.structured_content["nothing_to_do"] is True, "[legacy] accept on an empty plan: nothing to do")
        result = await client.call_tool("apply", args(hash_))
        check(result.is_error and "not " + hash_ in text_of(result), "the old hash is refused once applied")


async def main():
    for mode in ["auto", "legacy"]:
        await read_only(mode)
    await apply_flows()
    print("all MCP client checks passed")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
