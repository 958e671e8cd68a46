"""Strands Agents (``strands-agents`` 1.x) on the otelmw pipeline (``otelmw_strands``).

* ``instrumentor``: the targets, each wrapped when its own module is imported, and the
  ``strands`` normalizer.
* ``turns``: ``Agent._run_loop`` (every invocation mode enters it, inside Strands' own
  ``invoke_agent`` span) → the turn.
* ``models``: ``OpenAIModel.stream`` → one ``chat`` call per provider request through
  ``Pipeline.arun_llm``, the request in the OpenAI chat shape the model formats.
* ``tools``: ``_run_tool`` (the terminal of Strands' ``ExecuteToolStage`` middleware,
  inside Strands' own ``execute_tool`` span) → ``Pipeline.arun_tool``, recorded on
  Strands' span when it records.
* ``results``: the ``strands`` normalizer of Strands' ``ToolResult``.

Strands' own tracing, hooks and middleware run as without otelmw; what otelmw does
with Strands' spans is in docs/telemetry.md (``otelmw_strands``).
"""

from .instrumentor import StrandsInstrumentor

__all__ = ["StrandsInstrumentor"]
