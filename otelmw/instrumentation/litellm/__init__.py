"""LiteLLM on the otelmw pipeline (``otelmw_litellm``).

* ``instrumentor``: ``LiteLLMInstrumentor``, the wrapped LiteLLM functions, the
  ``litellm`` normalizer;
* ``calls``: ``completion``/``responses``/Anthropic ``messages`` → ``chat`` calls,
  ``embedding`` → ``embeddings`` calls; the cost LiteLLM computed;
* ``providers``: the provider (the conventions' names) and server LiteLLM routes to;
* ``steps``: ``Router`` endpoints → a ``router {model group}`` step over their attempts;
* ``tools``: ``run_tool_loop`` → a turn; its tool calls → ``execute_tool`` calls.
"""

from __future__ import annotations

from .instrumentor import LiteLLMInstrumentor

__all__ = ["LiteLLMInstrumentor"]
