"""``otelmw_llamaindex``: which LlamaIndex functions are wrapped, by which adapter
module (see the package docstring)."""

from __future__ import annotations

from typing import Any

from .._base import OtelmwInstrumentor, Wrapper
from .handoffs import run_agent_step
from .models import LLMClasses, llm_class_defined
from .results import NORMALIZER, instrumentation_failed
from .tools import (
    acall_tool,
    agent_call_tool,
    awith_selection,
    call_tool,
    call_tool_step,
    with_selection,
)
from .turns import workflow_run

_BASE_LLM = "llama_index.core.base.llms.base"
_AGENT = "llama_index.core.agent.workflow.base_agent"
_MULTI_AGENT = "llama_index.core.agent.workflow.multi_agent_workflow"
_CALLING = "llama_index.core.tools.calling"


class LlamaIndexInstrumentor(OtelmwInstrumentor):
    """``otelmw_llamaindex`` (see the package docstring)."""

    root_module = "llama_index.core"
    dependencies = ("llama-index-core >= 0.14.5, < 0.15",)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        self._llm_classes = LLMClasses()
        return [
            ("workflows.workflow", "Workflow.run", workflow_run),
            (_BASE_LLM, "BaseLLM.__pydantic_init_subclass__",
             llm_class_defined(self._llm_classes)),
            (_AGENT, "BaseWorkflowAgent._call_tool", agent_call_tool),
            (_AGENT, "BaseWorkflowAgent.call_tool", call_tool_step),
            (_MULTI_AGENT, "AgentWorkflow._call_tool", agent_call_tool),
            (_MULTI_AGENT, "AgentWorkflow.call_tool", call_tool_step),
            (_MULTI_AGENT, "AgentWorkflow.run_agent_step", run_agent_step),
            (_CALLING, "call_tool", call_tool),
            (_CALLING, "acall_tool", acall_tool),
            (_CALLING, "call_tool_with_selection", with_selection),
            (_CALLING, "acall_tool_with_selection", awith_selection),
        ]

    def _after_instrument(self, **kwargs: Any) -> None:
        try:
            from llama_index.core.base.llms.base import BaseLLM

            self._llm_classes.wrap_tree(BaseLLM)
        except Exception as exc:
            instrumentation_failed("wrap_llm_classes", exc)

    def _after_uninstrument(self, **kwargs: Any) -> None:
        classes = getattr(self, "_llm_classes", None)
        if classes is not None:
            classes.restore()

    def result_normalizer(self) -> Any:
        return NORMALIZER



