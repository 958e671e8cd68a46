"""Other instrumentations of the libraries otelmw instruments ("peers"), and what a call
gets twice when one runs beside otelmw.

Users come to otelmw from the official OpenTelemetry instrumentations, OpenLLMetry and
OpenInference, and often leave them installed. ``opentelemetry-instrument`` starts every
installed instrumentor, so each call of the library then gets otelmw's span and the
peer's. ``active_peers`` finds the peers that ``opentelemetry-instrument`` is about to
start beside otelmw's instrumentor of the same library, by its own rules (an entry point
named in ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` is skipped, and so is one whose
library is missing or outside its range); ``run_notice.peer_lines`` says so.

What doubles was measured with the releases named in ``PEERS`` (one openai, anthropic,
LiteLLM, LangChain agent, OpenAI Agents SDK or MCP call under ``opentelemetry-instrument``,
``tests/test_peers.py``); docs/telemetry.md,
"Side by side with other instrumentations", has the combinations.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from importlib import metadata
from typing import NamedTuple

INSTRUMENTOR_GROUP = "opentelemetry_instrumentor"


class Peer(NamedTuple):
    """Another project's instrumentation of a library otelmw instruments."""

    project: str  # who makes it, as users know it
    otelmw: str  # otelmw's instrumentor (entry point) of the same library
    doubles: str  # what each call of the library gets besides otelmw's telemetry


_METRICS = ("its own gen_ai.client.operation.duration and gen_ai.client.token.usage points "
            "(the same metric names: summed by name, every call counts twice)")
_OPENLLMETRY_CONTENT = ("recording prompts and completions by default "
                        "(TRACELOOP_TRACE_CONTENT=false stops that)")
_OPENINFERENCE_CONTENT = ("recording inputs and outputs by default "
                          "(OPENINFERENCE_HIDE_INPUTS/OPENINFERENCE_HIDE_OUTPUTS stop that)")

# By distribution name (PEP 503 normalized).
PEERS: dict[str, Peer] = {
    "opentelemetry-instrumentation-genai-openai": Peer(
        "official OpenTelemetry", "otelmw_openai",
        f"a second `chat {{model}}` span, and {_METRICS}"),
    "opentelemetry-instrumentation-openai": Peer(
        "OpenLLMetry", "otelmw_openai",
        f"a second span (`openai.chat`), {_OPENLLMETRY_CONTENT}, and {_METRICS}"),
    "openinference-instrumentation-openai": Peer(
        "OpenInference", "otelmw_openai",
        f"a second span (`ChatCompletion`), {_OPENINFERENCE_CONTENT}"),
    "opentelemetry-instrumentation-genai-anthropic": Peer(
        "official OpenTelemetry", "otelmw_anthropic",
        f"a second `chat {{model}}` span, and {_METRICS}"),
    "opentelemetry-instrumentation-anthropic": Peer(
        "OpenLLMetry", "otelmw_anthropic",
        f"a second span (`anthropic.chat`), {_OPENLLMETRY_CONTENT}, and {_METRICS}"),
    "openinference-instrumentation-anthropic": Peer(
        "OpenInference", "otelmw_anthropic",
        f"a second span (`messages.create`), {_OPENINFERENCE_CONTENT}"),
    "openinference-instrumentation-litellm": Peer(
        "OpenInference", "otelmw_litellm",
        f"a second span (`completion`), {_OPENINFERENCE_CONTENT}"),
    "opentelemetry-instrumentation-litellm": Peer(
        "OpenLLMetry", "otelmw_litellm",
        f"a second span (`litellm.chat`), {_OPENLLMETRY_CONTENT}, and {_METRICS}"),
    "opentelemetry-instrumentation-genai-langchain": Peer(
        "official OpenTelemetry", "otelmw_langchain",
        f"a second `invoke_agent {{name}}` span and a second `chat {{model}}` span, and "
        f"{_METRICS}"),
    "openinference-instrumentation-langchain": Peer(
        "OpenInference", "otelmw_langchain",
        "spans of its own for the agent, each graph node and each model call (`ChatOpenAI`), "
        f"{_OPENINFERENCE_CONTENT}"),
    "opentelemetry-instrumentation-langchain": Peer(
        "OpenLLMetry", "otelmw_langchain",
        "a second `invoke_agent {name}` span, spans of its own for the workflow, each node and "
        "each model call (`ChatOpenAI.chat`), a `create_agent {name}` span in a trace of its "
        "own, two spans for each hook of every middleware of the agent, otelmw's included "
        "(it patches `AgentMiddleware`'s hooks, which gives each middleware its four hook "
        f"nodes), {_OPENLLMETRY_CONTENT}, and {_METRICS}"),
    "opentelemetry-instrumentation-genai-openai-agents": Peer(
        "official OpenTelemetry", "otelmw_openai_agents",
        "a second `invoke_agent {name}` span, under an `invoke_workflow` span of its own"),
    "openinference-instrumentation-openai-agents": Peer(
        "OpenInference", "otelmw_openai_agents",
        "spans of its own for the workflow, the agent, each turn and each model call "
        f"(`generation`), {_OPENINFERENCE_CONTENT}"),
    "opentelemetry-instrumentation-mcp": Peer(
        "OpenLLMetry", "otelmw_mcp",
        "on mcp 1.x a span of its own for each tool the server runs (`{tool}.tool`, "
        "recording its arguments and result) and for each other request (`{method}.mcp`); "
        "on mcp 2.x no span of its own: its import hook fails there (`streamablehttp_client` "
        "is gone) and otelmw's client-side `execute_tool` span is lost with it"),
}
# OpenInference's pydantic-ai package is no instrumentor (no entry point): it converts
# pydantic-ai's own spans in a span processor the user adds, and never doubles a call.


class ActivePeer(NamedTuple):
    distribution: str  # as installed, e.g. opentelemetry-instrumentation-openai
    version: str
    entry_point: str  # its name in OTEL_PYTHON_DISABLED_INSTRUMENTATIONS
    peer: Peer


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def active_peers(disabled: Collection[str]) -> list[ActivePeer]:
    """The peers ``opentelemetry-instrument`` starts beside an otelmw instrumentor of the
    same library that starts too (``disabled``: ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``).
    Never raises: a peer that cannot be judged is left out."""
    if "*" in disabled:
        return []
    from opentelemetry.instrumentation.dependencies import get_dist_dependency_conflicts

    from .instrumentation._base import host_unsupported

    found: dict[str, ActivePeer] = {}
    ours: dict[str, metadata.EntryPoint] = {}
    theirs: list[tuple[metadata.EntryPoint, metadata.Distribution, Peer]] = []
    for ep in metadata.entry_points(group=INSTRUMENTOR_GROUP):
        if ep.name.startswith("otelmw_"):
            ours.setdefault(ep.name, ep)
            continue
        dist = ep.dist
        peer = PEERS.get(normalized(dist.metadata["Name"] or "")) if dist is not None else None
        if dist is not None and peer is not None and ep.name not in disabled:
            theirs.append((ep, dist, peer))
    judged: dict[str, bool] = {}
    for ep, dist, peer in theirs:
        name = dist.metadata["Name"]
        if name in found or peer.otelmw in disabled or peer.otelmw not in ours:
            continue
        try:
            if get_dist_dependency_conflicts(dist) is not None:
                continue  # its library is missing or out of its range: it does not start
            if peer.otelmw not in judged:
                instrumentor = ours[peer.otelmw].load()()
                judged[peer.otelmw] = host_unsupported(
                    peer.otelmw, instrumentor.instrumentation_dependencies()) is None
        except Exception:  # a broken installation is not ours to report here
            continue
        if judged[peer.otelmw]:
            found[name] = ActivePeer(name, dist.version, ep.name, peer)
    return list(found.values())
