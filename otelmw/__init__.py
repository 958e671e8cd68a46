"""otelmw: the plugin-middleware contract for AI agents, made visible in OpenTelemetry.

The core (``otelmw.core``: contract, rewrites, execution chain, results, hooks,
plugins, pipeline) imports nothing from OpenTelemetry; ``otelmw.telemetry``
observes it through ``otelmw.core.seam.PipelineObserver``.
"""

import sys as _sys

from .core.calls import NextCallReusedError
from .core.contract import (
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
from .core.pipeline import Pipeline, ToolArgumentsError, get_pipeline, parse_arguments
from .core.plugins import PluginContext, PluginManager, get_plugin_manager, load_plugins
from .core.results import (
    ListMemoryAdapter,
    MemoryAdapter,
    MiddlewareContext,
    MiddlewareRegistry,
    NormalizedToolResult,
    NormalizerRegistry,
    PassThroughMiddleware,
    RuntimeMiddlewareRegistry,
    RuntimeToolResultMiddleware,
    get_default_middleware_registry,
    get_middleware,
    register_middleware,
)
from .version import __version__

# The modules' homes before ``otelmw.core`` existed stay importable as the same module
# objects, so code written against ``otelmw.results`` and friends keeps working, and
# otelmw's own exceptions keep the names they are exported under in ``error.type``
# (``core.failures.exported_from``; tests/test_public_names.py pins both).
STABLE_MODULES = {name: f"core.{name}" for name in (
    "contract", "failures", "payloads", "pipeline", "plugins", "registry", "results")} | {
    "chain": "core.calls", "hooks": "core.calls", "llm_calls": "core.pipeline",
    "memory": "core.results", "settings": "config.settings", "tool_calls": "core.pipeline"}
for _old, _new in STABLE_MODULES.items():
    _sys.modules[f"{__name__}.{_old}"] = globals()[_old] = _sys.modules[f"{__name__}.{_new}"]
del _old, _new

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
    "NormalizerRegistry",
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
