"""The middleware pipeline: everything here imports nothing from OpenTelemetry.

``otelmw.telemetry`` observes it through the seam, ``seam.PipelineObserver``; see
docs/architecture.md for the flow of one call through these modules.

The names below are the core's public API, and the only names a host adapter
(``otelmw/instrumentation/``) may import from it (``tests/test_host_api.py`` checks):
the pipeline and its turns, the records a call is described by, the contract's names,
and the host-adapter API of ``host.py`` (open a call, report what the host observed,
nested calls).
"""

from . import host
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
from .host import *  # noqa: F403 (the host-adapter API: host.__all__)
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
    "CallInfo",
    "Layer",
    "MiddlewareContext",
    "NormalizedToolResult",
    "Pipeline",
    "PipelineObserver",
    "RuntimeContext",
    "Turn",
    "current_runtime_context",
    "get_pipeline",
    "new_request_id",
]
__all__ += host.__all__
