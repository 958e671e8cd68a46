"""Hermes Agent (``hermes-agent`` 0.19-0.20) on the otelmw pipeline.

* ``turns``: ``run_conversation`` → ``invoke_agent hermes``.
* ``provider_calls``: a provider attempt → ``chat``, opened at Hermes' ``llm_request``
  stage and run by ``run_llm`` around Hermes' ``llm_execution`` chain.
* ``tools``: a tool call → ``execute_tool``, opened at the ``tool_request`` stage and run
  by ``run_tool`` around the outermost ``tool_execution`` chain.
* ``middleware``: Hermes' plugins' middleware callbacks, run by otelmw's request stage
  and execution chain (spans, outcomes, failures as for otelmw's own plugins).
* ``hooks``: every hook firing (with or without callbacks) → an ``otelmw.hook.<name>``
  record.
* ``calls``: Hermes' kwargs → otelmw calls; the calls a turn opened ahead of running them.
* ``results``: Hermes' tool-result convention (the ``hermes`` runtime's normalizer).
* ``instrumentor``: ``HermesInstrumentor``, the targets. Wrappers fail open.
"""

from .instrumentor import HermesInstrumentor

__all__ = ["HermesInstrumentor"]
