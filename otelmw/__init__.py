"""otelmw: the plugin-middleware contract for AI agents, made visible in OpenTelemetry.

The core (contract, chain, results, hooks, plugins, pipeline) imports nothing
from OpenTelemetry; ``otelmw.telemetry`` observes it through ``PipelineObserver``.
"""

from .chain import NextCallReusedError
from .contract import (
    HOOK_NAMES,
    LLM_EXECUTION,
    LLM_REQUEST,
    MIDDLEWARE_KINDS,
    MIDDLEWARE_SCHEMA_VERSION,
    TELEMETRY_SCHEMA_VERSION,
    TOOL_EXECUTION,
    TOOL_REQUEST,
    RuntimeContext,
    current_runtime_context,
    runtime_context,
)
from .memory import ListMemoryAdapter, MemoryAdapter
from .pipeline import Pipeline, ToolArgumentsError, get_pipeline, parse_arguments
from .plugins import PluginContext, PluginManager, get_plugin_manager, load_plugins
from .results import (
    MiddlewareContext,
    MiddlewareRegistry,
    NormalizedToolResult,
    PassThroughMiddleware,
    RuntimeMiddlewareRegistry,
    RuntimeToolResultMiddleware,
    get_default_middleware_registry,
    get_middleware,
    register_middleware,
)

__version__ = "0.1.0"

__all__ = [
    "HOOK_NAMES",
    "LLM_EXECUTION",
    "LLM_REQUEST",
    "MIDDLEWARE_KINDS",
    "MIDDLEWARE_SCHEMA_VERSION",
    "TELEMETRY_SCHEMA_VERSION",
    "TOOL_EXECUTION",
    "TOOL_REQUEST",
    "ListMemoryAdapter",
    "MemoryAdapter",
    "MiddlewareContext",
    "MiddlewareRegistry",
    "NextCallReusedError",
    "NormalizedToolResult",
    "PassThroughMiddleware",
    "Pipeline",
    "PluginContext",
    "PluginManager",
    "RuntimeContext",
    "RuntimeMiddlewareRegistry",
    "RuntimeToolResultMiddleware",
    "ToolArgumentsError",
    "__version__",
    "current_runtime_context",
    "get_default_middleware_registry",
    "get_middleware",
    "get_pipeline",
    "get_plugin_manager",
    "load_plugins",
    "parse_arguments",
    "register_middleware",
    "runtime_context",
]
