"""PraisonAI agents (``praisonaiagents`` 1.7) on the otelmw pipeline.

* ``turns``: ``chat``/``achat``/``start``/``run``/``astart``/``arun`` and the
  ``_start_stream`` generator → one ``invoke_agent {name}`` each. ``chat`` returning
  ``None`` (PraisonAI's report of a failed model call), or a stream whose last model
  request failed, marks the turn failed.
* ``model_requests``: each SDK request of PraisonAI's clients → ``chat {model}``.
* ``tools``: ``execute_tool``/``execute_tool_async`` → ``execute_tool {name}``.
* ``hooks``: every firing of PraisonAI's hook points → an ``otelmw.hook.<event>`` record.
* ``fail_open``: what every wrapper shares: its errors are counted under failures
  ``instrumentation`` and the host call runs once, as without otelmw.
* ``instrumentor``: ``PraisonAIInstrumentor``, the targets.
"""

from .instrumentor import PraisonAIInstrumentor
from .model_requests import patch_client
from .turns import runtime_id_of

__all__ = ["PraisonAIInstrumentor", "patch_client", "runtime_id_of"]
