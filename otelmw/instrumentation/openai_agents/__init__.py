"""The OpenAI Agents SDK (``openai-agents`` 0.20 to 0.25) on the otelmw pipeline
(``otelmw_openai_agents``).

* ``runs``: ``Runner.run``/``run_sync``/``run_streamed`` → one ``invoke_agent
  {starting agent}`` turn per run; an agent a handoff passes the run to → a child
  ``invoke_agent {agent}`` turn over its part of the run.
* ``models``: ``get_response``/``stream_response`` of the SDK's OpenAI Responses and
  chat-completions models → ``chat {model}`` through the contract (``otelmw_openai``
  below only enriches the span).
* ``tools``: every function tool (MCP tools included) → ``execute_tool {name}`` through
  the contract, between the SDK's tool guardrails and hooks, which run unchanged.
* ``instrumentor``: ``OpenAIAgentsInstrumentor``, the targets.

The SDK's own tracing is left alone: its processors get its spans as without otelmw.
"""

from .instrumentor import OpenAIAgentsInstrumentor

__all__ = ["OpenAIAgentsInstrumentor"]
