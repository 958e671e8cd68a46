"""The middleware pipeline: everything here imports nothing from OpenTelemetry.

``otelmw.telemetry`` observes it through the seam, ``seam.PipelineObserver``; see
docs/architecture.md for the flow of one call through these modules.

The names below are the core's public API, and the only names a host adapter
(``otelmw/instrumentation/``) may import from it (``tests/test_host_api.py`` checks):
the pipeline and its turns, the records a call is described by, the contract's names,
and the host-adapter API of ``host.py`` (open a call, report what the host observed,
nested calls).
"""

from .contract import (
    LLM_EXECUTION,
    LLM_REQUEST,
    ORIGINAL_KEY,
    PAYLOAD_KEY,
    REQUEST_KINDS,
    TOOL_EXECUTION,
    TOOL_REQUEST,
    CallInfo,
    RuntimeContext,
    current_runtime_context,
    new_request_id,
)
from .host import (
    AttributeValue,
    HostCall,
    HostOutcome,
    HostStep,
    LayerRun,
    Payload,
    RewriteOutcome,
    ToolStatus,
    WrapperOutcome,
    changed_payload_keys,
    current_llm_call,
    current_tool_call,
    describe_call,
    enrich_llm_call,
    enrich_tool_call,
    hook_firings_recorded,
    host_layer,
    install_observer,
    instrumentation_failed,
    llm_call_current,
    observing,
    open_call,
    open_step,
    record_protocol_operation,
    tool_call_current,
    unopened_call,
)
from .pipeline import Pipeline, Turn, get_pipeline
from .registry import Layer
from .results import TOOL_ERROR_PREFIX, MiddlewareContext, NormalizedToolResult
from .seam import PipelineObserver

__all__ = [
    "LLM_EXECUTION",
    "LLM_REQUEST",
    "ORIGINAL_KEY",
    "PAYLOAD_KEY",
    "REQUEST_KINDS",
    "TOOL_ERROR_PREFIX",
    "TOOL_EXECUTION",
    "TOOL_REQUEST",
    "AttributeValue",
    "CallInfo",
    "HostCall",
    "HostOutcome",
    "HostStep",
    "Layer",
    "LayerRun",
    "MiddlewareContext",
    "NormalizedToolResult",
    "Payload",
    "Pipeline",
    "PipelineObserver",
    "RewriteOutcome",
    "RuntimeContext",
    "ToolStatus",
    "Turn",
    "WrapperOutcome",
    "changed_payload_keys",
    "current_llm_call",
    "current_runtime_context",
    "current_tool_call",
    "describe_call",
    "enrich_llm_call",
    "enrich_tool_call",
    "get_pipeline",
    "hook_firings_recorded",
    "host_layer",
    "install_observer",
    "instrumentation_failed",
    "llm_call_current",
    "new_request_id",
    "observing",
    "open_call",
    "open_step",
    "record_protocol_operation",
    "tool_call_current",
    "unopened_call",
]
