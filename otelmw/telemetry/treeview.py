"""Render stored OTLP-JSON traces as indented trees (``otelmw traces``, ``otelmw demo``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

KEY_ATTRIBUTES = (
    "gen_ai.provider.name", "gen_ai.response.model", "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons", "gen_ai.tool.call.id",
    "otelmw.middleware.outcome", "otelmw.rewrite.source", "otelmw.rewrite.reason",
    "otelmw.rewrite.changed_keys", "otelmw.result.success", "otelmw.result.error_message",
    "otelmw.result.raw.digest", "otelmw.stream.ended_by", "error.type",
)
_STATUS = {0: "", 1: "OK", 2: "ERROR"}


def any_value(v: dict[str, Any]) -> Any:
    """Decode an OTLP-JSON AnyValue."""
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [any_value(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return {kv["key"]: any_value(kv.get("value", {}))
                for kv in v["kvlistValue"].get("values", [])}
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


@dataclass
class SpanView:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    status: str
    attributes: dict[str, Any]
    service: str = ""
    children: list[SpanView] = field(default_factory=list)

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e6


def spans_from_requests(requests: Iterable[dict[str, Any]]) -> Iterator[SpanView]:
    for req in requests:
        for rs in req.get("resourceSpans", []):
            res = {kv["key"]: any_value(kv.get("value", {}))
                   for kv in rs.get("resource", {}).get("attributes", [])}
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    yield SpanView(
                        trace_id=s.get("traceId", ""), span_id=s.get("spanId", ""),
                        parent_id=s.get("parentSpanId", ""), name=s.get("name", ""),
                        start_ns=int(s.get("startTimeUnixNano", 0)),
                        end_ns=int(s.get("endTimeUnixNano", 0)),
                        status=_STATUS.get(_status_code(s), ""),
                        attributes={kv["key"]: any_value(kv.get("value", {}))
                                    for kv in s.get("attributes", [])},
                        service=str(res.get("service.name", "")))


def _status_code(span: dict[str, Any]) -> int:
    code = span.get("status", {}).get("code", 0)
    if isinstance(code, str):
        return {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(code, 0)
    return int(code)


def group_traces(spans: Iterable[SpanView]) -> dict[str, list[SpanView]]:
    """trace id → root spans (children linked), in start order."""
    by_trace: dict[str, list[SpanView]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    out: dict[str, list[SpanView]] = {}
    for tid, items in by_trace.items():
        ids = {s.span_id: s for s in items}
        roots = []
        for s in sorted(items, key=lambda x: x.start_ns):
            parent = ids.get(s.parent_id)
            if parent is not None and parent is not s:
                parent.children.append(s)
            else:
                roots.append(s)
        out[tid] = roots
    return dict(sorted(out.items(), key=lambda kv: min(r.start_ns for r in kv[1])))


def _fmt_attr(v: Any) -> str:
    if isinstance(v, str) and len(v) > 40 and v.startswith("sha256"):
        return v[:22] + "…"
    if isinstance(v, str) and len(v) > 60:
        return v[:57] + "…"
    return str(v)


def render_tree(roots: list[SpanView], *, attrs: tuple[str, ...] = KEY_ATTRIBUTES) -> str:
    lines: list[str] = []

    def walk(s: SpanView, depth: int) -> None:
        status = f" [{s.status}]" if s.status else ""
        shown = [f"{k.split('.', 1)[-1]}={_fmt_attr(s.attributes[k])}" for k in attrs
                 if k in s.attributes]
        extra = ("  " + " ".join(shown)) if shown else ""
        lines.append(f"{'  ' * depth}{s.name}  {s.duration_ms:.2f} ms{status}{extra}")
        for c in s.children:
            walk(c, depth + 1)

    for r in roots:
        walk(r, 0)
    return "\n".join(lines)


def summarize(tid: str, roots: list[SpanView]) -> str:
    def count(s: SpanView) -> int:
        return 1 + sum(count(c) for c in s.children)

    n = sum(count(r) for r in roots)
    errors = any(_has_error(r) for r in roots)
    start = min(r.start_ns for r in roots)
    end = max(r.end_ns for r in roots)
    return (f"{tid}  {roots[0].name:<32} spans={n:<4} {(end - start) / 1e6:9.2f} ms"
            f"{'  ERROR' if errors else ''}")


def _has_error(s: SpanView) -> bool:
    return s.status == "ERROR" or any(_has_error(c) for c in s.children)
