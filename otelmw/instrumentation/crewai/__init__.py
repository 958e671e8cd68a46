"""CrewAI (``crewai`` 1.x) on the otelmw pipeline (``otelmw_crewai``).

* ``instrumentor``: the targets and the ``crewai`` normalizer.
* ``turns``: ``Crew.kickoff``/``akickoff`` → ``invoke_agent {crew}``; each agent's
  task (``Agent.execute_task``/``aexecute_task``) and a lone agent's
  ``Agent.kickoff``/``kickoff_async`` → ``invoke_agent {role}``, nested in the crew's.
* ``models``: each request of CrewAI's native OpenAI provider (and the OpenAI-compatible
  ones built on it) → one ``chat`` call through the pipeline, on the OpenAI body CrewAI
  built, after its own ``before_llm_call`` hooks; the openai SDK layer only enriches it.
* ``tools``: each tool run (``BaseTool.run``/``arun``, ``Tool.run``/``arun``,
  ``CrewStructuredTool.invoke``/``ainvoke``) → one ``execute_tool`` call through the
  pipeline, inside CrewAI's own tool hooks, cache and events; native calls carry the
  model's call id.
* ``results``: the normalizer (a returned ``ToolFailure`` is a failure) and what CrewAI
  gets back.
"""

from .instrumentor import CrewAIInstrumentor

__all__ = ["CrewAIInstrumentor"]
