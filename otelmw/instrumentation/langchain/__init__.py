"""LangChain 1.x and LangGraph on the otelmw pipeline (``otelmw_langchain``).

* ``middleware``: otelmw's own ``AgentMiddleware``, appended last to every
  ``create_agent``: each model call → ``chat``, each tool call → ``execute_tool``,
  through otelmw's contract (rewrites via ``override``, blocks as error ``ToolMessage``).
* ``turns``: each root graph run (``Pregel.stream``/``astream``, so ``invoke``/``ainvoke``
  too) → ``invoke_agent {graph name}``.
* ``seams``: model and tool calls no agent middleware sees (plain graphs, direct use)
  → the same spans through ``BaseChatModel``/``BaseTool``, never twice.
* ``requests``: LangChain's model request ↔ the OpenAI chat-shaped request otelmw's
  middleware sees; the provider names.
* ``results``: the ``langchain`` normalizer and what LangChain gets back.
* ``instrumentor``: ``LangChainInstrumentor``, the targets.
"""

from .instrumentor import LangChainInstrumentor

__all__ = ["LangChainInstrumentor"]
