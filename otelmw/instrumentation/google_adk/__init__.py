"""Google ADK (``google-adk``, ``from google.adk import ...``), 2.13 and later in 2.x:
``Runner.run_async`` / ``run`` / ``InMemoryRunner`` runs of ``LlmAgent``s and their
sub-agents, with any ADK model (``Gemini``, ``LiteLlm``, ...).

* ``turns``: each agent run (root and sub-agents) a turn, inside ADK's own
  ``invoke_agent`` span (which is the turn's span when it records);
* ``models``: each model request a ``chat`` call through the pipeline, the innermost
  layer under ADK's ``before_model_callback`` chain and its ``generate_content`` span;
* ``tools``: each tool call an ``execute_tool`` call through the pipeline, recorded on
  ADK's own ``execute_tool`` span; the ``google-adk`` normalizer;
* ``fail_open``: the adapter's failure count.

ADK's callbacks and plugins (``before/after_model_callback``, ``before/after_tool_callback``,
their error callbacks, ``BasePlugin``) run as without otelmw: otelmw registers none and
wraps none of them.
"""

from .instrumentor import GoogleADKInstrumentor

__all__ = ["GoogleADKInstrumentor"]
