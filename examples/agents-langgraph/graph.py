"""A LangGraph graph on the cluster's own model: a drafting step, then a review step that
tightens the draft, both answered by the agent's OpenAI-compatible endpoint.

    kubectl --context k3d-agents -n k3d-gpu-agent port-forward svc/ovms 8000:8000 &
    python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
    .venv/bin/python graph.py "Explain P-cores and E-cores in two sentences."

OPENAI_BASE_URL and MODEL override the endpoint and the served model.
"""

import os
import sys

from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph

# What `k3d-gpu agent` prints for this config: OVMS's OpenAI API, reached by port-forward.
BASE_URL = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v3")
MODEL = os.environ.get("MODEL", "Qwen3-4B-int4-ov")

# The model server has no API key; the client needs some string.
llm = ChatOpenAI(base_url=BASE_URL, api_key="unused", model=MODEL, temperature=0)


def draft(state: MessagesState) -> dict:
    return {"messages": [llm.invoke(state["messages"])]}


def review(state: MessagesState) -> dict:
    ask = ("user", "Rewrite your answer above to be shorter and exact. Reply with the rewrite only.")
    return {"messages": [llm.invoke(state["messages"] + [ask])]}


def build():
    graph = StateGraph(MessagesState)
    graph.add_node("draft", draft)
    graph.add_node("review", review)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "review")
    graph.add_edge("review", END)
    return graph.compile()


if __name__ == "__main__":
    question = " ".join(sys.argv[1:]) or "Explain P-cores and E-cores in two sentences."
    final = build().invoke({"messages": [("user", question)]})
    print(final["messages"][-1].content)
