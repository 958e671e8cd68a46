"""Observer-hook firings as OTLP log records (``otelmw.hook.<name>``).

Which firings become records is ``OTELMW_HOOK_EVENTS``: ``registered`` (the
default: otelmw's hook points with callbacks, and every firing of a host's native
hook points — the host instrumentors decide that), ``all`` or ``none``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from opentelemetry import _logs

from ..core.contract import MIDDLEWARE_SCHEMA_VERSION, TELEMETRY_SCHEMA_VERSION, CallInfo
from ..core.failures import error_type
from ..core.results import NormalizedToolResult
from . import attributes
from .content.policy import redact
from .content.values import clean_str as _c
from .spans.operation import Signals, call_ids, digest_once


class HookEventEmitter:
    """``hook_fired``: one log record per hook firing the core reports (which
    firings it reports is the observer's ``hook_events`` mode, read by the core)."""

    def __init__(self, signals: Signals) -> None:
        self.signals = signals
        self.logger, self.content = signals.logger, signals.content

    def fired(self, call: CallInfo, hook_name: str, payload: Mapping[str, Any],
              failures: int) -> None:
        try:
            # Nothing to build (attributes, digests) when no log processor listens.
            enabled = getattr(self.logger, "enabled", None)
            if enabled is not None and not enabled(event_name=f"otelmw.hook.{hook_name}"):
                return
            self._emit(call, hook_name, payload, failures)
        except Exception as exc:
            self.signals.internal_failure("hook_fired", exc)

    def _emit(self, call: CallInfo, hook_name: str, payload: Mapping[str, Any],
                   failures: int) -> None:
        # The payload's own schema versions when it carries them (a host's
        # hooks, e.g. Hermes' ``hermes.observer.v1``), else otelmw's.
        tsv, msv = payload.get("telemetry_schema_version"), payload.get(
            "middleware_schema_version")
        attrs: dict[str, Any] = {
            attributes.OTELMW_HOOK_NAME: hook_name,
            attributes.OTELMW_SCHEMA_TELEMETRY:
                tsv if isinstance(tsv, str) else TELEMETRY_SCHEMA_VERSION,
            attributes.OTELMW_SCHEMA_MIDDLEWARE:
                msv if isinstance(msv, str) else MIDDLEWARE_SCHEMA_VERSION,
            attributes.OTELMW_HOOK_FAILURES: failures,
        }
        call_ids(call, attrs)
        if call.operation == "chat":
            if call.model:
                attrs[attributes.GEN_AI_REQUEST_MODEL] = _c(call.model)
        elif call.operation == "execute_tool":  # (agent-level host hooks carry neither)
            attrs[attributes.GEN_AI_TOOL_NAME] = _c(call.tool_name) or "unknown"
            if call.tool_call_id:
                attrs[attributes.GEN_AI_TOOL_CALL_ID] = _c(call.tool_call_id)
        trace_entries = payload.get("middleware_trace")
        if trace_entries:
            # free-text ``reason``s: the redactor's, as every other text
            attrs[attributes.OTELMW_MIDDLEWARE_TRACE] = redact(
                json.dumps(trace_entries, default=str)[:4096])
        body: dict[str, Any] = {}
        cap = self.signals.digest_max_bytes
        for key, attr in (("request", attributes.OTELMW_REQUEST_DIGEST),
                          ("args", attributes.OTELMW_TOOL_ARGS_DIGEST)):
            if key in payload:
                attrs[attr], _ = digest_once(call, payload[key], cap)
                if self.content.on_events:
                    body[key] = self.content.render(payload[key])
        normalized = payload.get("normalized")
        if isinstance(normalized, NormalizedToolResult):
            attrs[attributes.OTELMW_RESULT_SUCCESS] = bool(normalized.success)
            attrs[attributes.OTELMW_RESULT_RAW_DIGEST], _ = digest_once(
                call, normalized.raw_result, cap)
            if self.content.on_events:
                body["result"] = self.content.render(normalized.model_text())
        status = payload.get("status")
        if isinstance(status, str):
            attrs[attributes.OTELMW_RESULT_STATUS] = status
        err = payload.get("error")
        if isinstance(err, BaseException):
            attrs[attributes.ERROR_TYPE] = error_type(err)
        elif isinstance(payload.get("error_type"), str):
            attrs[attributes.ERROR_TYPE] = payload["error_type"]
        self.logger.emit(event_name=f"otelmw.hook.{hook_name}",
                         severity_number=_logs.SeverityNumber.INFO,
                         body=body or None, attributes=attrs)
