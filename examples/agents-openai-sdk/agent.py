"""An OpenAI Agents SDK agent that runs on the cluster's own model and sees the cluster
through `k3d-gpu mcp` (read-only tools: facts, validate, plan, agent, observe, audit).

    kubectl --context k3d-agents -n k3d-gpu-agent port-forward svc/ovms 8000:8000 &
    python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
    .venv/bin/python agent.py "Which accelerators does this machine have?"

OPENAI_BASE_URL and MODEL override the endpoint and the served model; K3D_GPU the binary.
"""

import asyncio
import os
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStdio
from openai import AsyncOpenAI

# What `k3d-gpu agent` prints for this config: OVMS's OpenAI API, reached by port-forward.
BASE_URL = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v3")
MODEL = os.environ.get("MODEL", "Qwen3-4B-int4-ov")
K3D_GPU = os.environ.get("K3D_GPU", "k3d-gpu")


async def main(question: str) -> None:
    # The model server has no API key; the client needs some string.
    client = AsyncOpenAI(base_url=BASE_URL, api_key="unused")
    # Nothing leaves the machine: no traces to OpenAI's platform.
    set_tracing_disabled(True)
    async with MCPServerStdio(
        name="k3d-gpu",
        params={"command": K3D_GPU, "args": ["mcp", "-c", "k3dgpu.toml"]},
        cache_tools_list=True,
    ) as k3d_gpu:
        agent = Agent(
            name="cluster guide",
            instructions="Answer from the k3d-gpu tools, briefly. Never call apply.",
            model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
            mcp_servers=[k3d_gpu],
        )
        result = await Runner.run(agent, question)
        print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "Which accelerators does this machine have?"))
