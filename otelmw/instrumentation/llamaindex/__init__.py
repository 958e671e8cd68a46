"""``otelmw_llamaindex``: LlamaIndex agents and workflows (``llama-index-core``).

* ``turns.py``: ``Workflow.run`` (an agent's ``run``, an ``AgentWorkflow`` run, any
  workflow) → the ``invoke_agent`` turn, inherited by the run's tasks;
* ``models.py``: every LLM class's ``chat``/``achat``/``stream_chat``/``astream_chat``
  (LlamaIndex's own model seam, any provider) → one ``chat`` call each through
  ``run_llm``/``arun_llm``; ``requests.py`` maps its request to and from the OpenAI
  chat shape;
* ``tools.py``: an agent's ``_call_tool`` (with the id of the ``ToolCall`` its step
  handles) and ``tools.calling.call_tool``/``acall_tool`` → one ``execute_tool`` call
  each through ``run_tool``/``arun_tool``;
* ``results.py``: the ``llamaindex`` normalizer (``ToolOutput``), what the agent gets
  back, the adapter's failure count.

LlamaIndex's own callbacks, ``instrumentation`` dispatcher (span and event handlers)
and retries run inside otelmw's calls as without otelmw; otelmw registers nothing
with them.
"""

from .instrumentor import LlamaIndexInstrumentor

__all__ = ["LlamaIndexInstrumentor"]
