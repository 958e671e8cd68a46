"""pydantic-ai (``pydantic-ai-slim`` 2.x) on the otelmw pipeline (``otelmw_pydantic_ai``).

* ``instrumentor``: ``Agent.iter`` (every run mode enters it) gets otelmw's capability
  appended to the run's ``capabilities``; the ``pydantic-ai`` normalizer.
* ``capability``: ``OtelmwCapability``, ordered innermost: the run → ``invoke_agent``
  (``wrap_run``), each attempt at a model request → one ``chat`` call through the
  pipeline (``get_wrapper_model``), each tool call → ``execute_tool`` through the
  pipeline around pydantic-ai's tool lifecycle (``wrap_tool_execute``); under
  pydantic-ai's own instrumentation, the contract without otelmw's spans.
* ``requests``: the request in the OpenAI chat shape for otelmw's plugins and spans,
  and a rewrite of it mapped back onto pydantic-ai's messages and settings.
* ``results``: tool results, control flow (``ModelRetry`` is not a failure), the
  normalizer.
"""

from .instrumentor import PydanticAIInstrumentor

__all__ = ["PydanticAIInstrumentor"]
