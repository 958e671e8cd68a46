"""One driver module per host for ``tests/test_one_plugin_every_host.py``.

Each driver module (``openai_sdk``, ``anthropic_sdk``, ``hermes``, ``praisonai``,
``litellm_loop``, ``langchain_agent``, ``langgraph_graph``, ``pydantic_ai_agent``,
``openai_agents_runner``, ``mcp_tool_loop``, ``google_genai_afc``, ``strands_agent``,
``crewai_agent``, ``google_adk_agent``, ``llamaindex_agent``:
named after the host, not after its package, so that it can never shadow the package it
imports) exposes one function,
``run_turn(server_url) -> dict``: one real tool-using turn of that host, written as the
host's users write one, against the scripted model
server at ``server_url`` (its root, ``http://127.0.0.1:PORT``), with the two tools below
(``get_weather`` and ``delete_file``, the one the plugin blocks); it returns
``{"final": <the answer>, ...}``. ``DRIVERS`` says, without importing a driver (its host
may be missing), which hosts each needs (its ``pytest.mark.host`` names) and which route
of the scripted server its model requests take (``None``: a host with no model call).

The model is scripted to call both tools in its first answer; the runner (``python -m
_support.one_plugin_hosts HOST SERVER_URL``, under ``otelmw run``) prints ``RESULT
{json}``: the driver's answer plus what each tool received (``RECEIVED``).
"""

# No ``from __future__ import annotations``: google-genai 1.x calls the tools (Python
# functions it calls itself) by their annotations as objects.
from typing import Any, NamedTuple


class Driver(NamedTuple):
    hosts: tuple[str, ...]  # the pytest.mark.host names
    # the scripted server's route: "chat", "messages", "gemini"; None: no model call
    api: str | None
    # whose id a tool call's span carries: "model" (the id the model gave it) or "mcp"
    # (the MCP rule: none on the client's span; the JSON-RPC request id on the server's)
    tool_call_ids: str = "model"
    # the host's own tracing puts spans of its steps between the turn and its calls
    # (Strands: its event-loop cycles)
    host_steps: bool = False
    # a model request's span is the host's own ``chat`` span (INTERNAL), otelmw's record
    # on it (Strands' model invocation), not otelmw's ``chat {model}`` CLIENT span
    chat_on_host_span: bool = False
    # the host's own tracing opens the run's root and the turn's span, with otelmw's
    # spans under them (Google ADK: ``invoke_workflow`` > ``invoke_agent`` >
    # ``generate_content`` > otelmw's ``chat``; its ``execute_tool`` is the tool call's)
    host_tracing: bool = False


DRIVERS = {
    "openai_sdk": Driver(("openai",), "chat"),
    "anthropic_sdk": Driver(("anthropic",), "messages"),
    "praisonai": Driver(("praisonai", "openai"), "chat"),
    "hermes": Driver(("hermes", "openai"), "chat"),
    "litellm_loop": Driver(("litellm",), "chat"),
    "langchain_agent": Driver(("langchain",), "chat"),
    "langgraph_graph": Driver(("langgraph",), "chat"),  # LangGraph without langchain
    "openai_agents_runner": Driver(("openai-agents",), "chat"),
    "pydantic_ai_agent": Driver(("pydantic-ai",), "chat"),
    "mcp_tool_loop": Driver(("mcp", "openai"), "chat", "mcp"),
    "google_genai_afc": Driver(("google-genai",), "gemini"),
    "strands_agent": Driver(("strands", "openai"), "chat", host_steps=True,
                            chat_on_host_span=True),
    "crewai_agent": Driver(("crewai", "openai"), "chat"),
    "google_adk_agent": Driver(("google-adk",), "gemini", host_tracing=True),
    "llamaindex_agent": Driver(("llamaindex",), "chat"),
}

PROMPT = "What is the weather in paris? Then delete /tmp/notes.txt."
SYSTEM = "You are a terse assistant."
# What the scripted model asks for, in its first answer: both tools at once.
MODEL_TOOL_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_weather", {"city": "paris"}),
    ("delete_file", {"path": "/tmp/notes.txt"}),
]

# What each tool was called with, in this process, in order.
RECEIVED: list[dict[str, Any]] = []


def get_weather(city: str) -> str:
    """Current weather for a city."""
    RECEIVED.append({"tool": "get_weather", "args": {"city": city}})
    return f"sunny and 21C in {city}"


def delete_file(path: str) -> str:
    """Delete a file."""
    RECEIVED.append({"tool": "delete_file", "args": {"path": path}})
    return f"deleted {path}"


TOOLS = {"get_weather": get_weather, "delete_file": delete_file}
PARAMETERS: dict[str, dict[str, Any]] = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"]},
    "delete_file": {"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]},
}


def description(name: str) -> str:
    return (TOOLS[name].__doc__ or name).strip()


def openai_tools() -> list[dict[str, Any]]:
    """The tools as OpenAI's chat API (and LiteLLM) take them."""
    return [{"type": "function", "function": {"name": name, "description": description(name),
                                              "parameters": PARAMETERS[name]}}
            for name in TOOLS]
