"""Stored OTLP-JSON traces as terminal waterfalls (``otelmw traces``, ``otelmw demo``).

A trace is drawn like Jaeger's timeline: one row per span with its start offset
from the trace's start, its duration, its place in the tree and a bar scaled to
the whole trace; its key attributes beside the bar (wrapped at word boundaries
onto further rows); the hook log events emitted under it; captured content when
the program recorded any. Every value from the store goes through
:func:`~otelmw.cli.terminal.printable` before it reaches the screen.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from .terminal import (
    BOLD,
    CYAN,
    DIM,
    GREEN,
    MAGENTA,
    RED,
    YELLOW,
    Style,
    cells,
    fit,
    printable,
    wrap,
)

# The attributes shown beside a span, under short labels (docs/telemetry.md has
# the full keys).
KEY_ATTRIBUTES: Final = {
    "gen_ai.provider.name": "provider", "gen_ai.response.model": "model",
    "gen_ai.usage.input_tokens": "input_tokens", "gen_ai.usage.output_tokens": "output_tokens",
    "gen_ai.response.finish_reasons": "finish", "gen_ai.tool.call.id": "call_id",
    "otelmw.middleware.outcome": "outcome", "otelmw.rewrite.source": "source",
    "otelmw.rewrite.reason": "reason", "otelmw.rewrite.changed_keys": "changed",
    "otelmw.result.success": "success", "otelmw.result.error_message": "error",
    "otelmw.result.raw.digest": "raw", "otelmw.stream.ended_by": "ended_by",
    "error.type": "error.type",
}
# Captured content (only under content capture): shown on rows of their own. Not
# gen_ai.tool.definitions: the same schemas on every chat span of a turn, no conversation.
CONTENT_ATTRIBUTES: Final = (
    "gen_ai.system_instructions", "gen_ai.input.messages", "gen_ai.output.messages",
    "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
)
# Hook event attributes worth a glance beside the event's name.
EVENT_ATTRIBUTES: Final = ("error.type", "otelmw.result.status", "otelmw.hook.failures")
_STATUS: Final = {0: "", 1: "OK", 2: "ERROR"}
_BAR_MIN: Final = 12
_ATTR_MIN: Final = 28  # narrower than this beside the bar: attributes go below the span
_CONTENT_LINES: Final = 3
_ATTR_LINES: Final = 4


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


def _attributes(items: Iterable[dict[str, Any]]) -> dict[str, Any]:
    return {kv["key"]: any_value(kv.get("value", {})) for kv in items}


@dataclass(slots=True)
class EventView:
    """One stored log record (an otelmw hook event) of a span."""

    trace_id: str
    span_id: str
    name: str
    time_ns: int
    attributes: dict[str, Any]
    body: Any = None


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
    status_message: str = ""
    children: list[SpanView] = field(default_factory=list)
    events: list[EventView] = field(default_factory=list)


def spans_from_requests(requests: Iterable[dict[str, Any]]) -> Iterator[SpanView]:
    for req in requests:
        for rs in req.get("resourceSpans", []):
            res = _attributes(rs.get("resource", {}).get("attributes", []))
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    yield SpanView(
                        trace_id=s.get("traceId", ""), span_id=s.get("spanId", ""),
                        parent_id=s.get("parentSpanId", ""), name=s.get("name", ""),
                        start_ns=int(s.get("startTimeUnixNano", 0)),
                        end_ns=int(s.get("endTimeUnixNano", 0)),
                        status=_STATUS.get(_status_code(s), ""),
                        status_message=str(s.get("status", {}).get("message", "")),
                        attributes=_attributes(s.get("attributes", [])),
                        service=str(res.get("service.name", "")))


def events_from_requests(requests: Iterable[dict[str, Any]]) -> Iterator[EventView]:
    """The span-correlated log records of stored log export requests."""
    for req in requests:
        for rl in req.get("resourceLogs", []):
            for sl in rl.get("scopeLogs", []):
                for rec in sl.get("logRecords", []):
                    if not rec.get("spanId"):
                        continue
                    body = any_value(rec["body"]) if rec.get("body") else None
                    yield EventView(
                        trace_id=rec.get("traceId", ""), span_id=rec["spanId"],
                        name=str(rec.get("eventName", "")),
                        time_ns=int(rec.get("timeUnixNano") or rec.get("observedTimeUnixNano")
                                    or 0),
                        attributes=_attributes(rec.get("attributes", [])), body=body)


def _status_code(span: dict[str, Any]) -> int:
    code = span.get("status", {}).get("code", 0)
    if isinstance(code, str):
        return {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(code, 0)
    return int(code)


def group_traces(spans: Iterable[SpanView], events: Iterable[EventView] = ()
                 ) -> dict[str, list[SpanView]]:
    """trace id → root spans (children linked, events attached), oldest trace first."""
    by_trace: dict[str, list[SpanView]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    by_span: dict[str, SpanView] = {}
    out: dict[str, list[SpanView]] = {}
    for tid, items in by_trace.items():
        ids = {s.span_id: s for s in items}
        by_span.update(ids)
        roots = []
        for s in sorted(items, key=lambda x: x.start_ns):
            parent = ids.get(s.parent_id)
            if parent is not None and parent is not s:
                parent.children.append(s)
            else:
                roots.append(s)
        out[tid] = roots
    for ev in events:
        owner = by_span.get(ev.span_id)
        if owner is not None and owner.trace_id == ev.trace_id:
            owner.events.append(ev)
    for s in by_span.values():
        s.events.sort(key=lambda e: e.time_ns)
    return dict(sorted(out.items(), key=lambda kv: min(r.start_ns for r in kv[1])))


def walk(roots: list[SpanView]) -> Iterator[SpanView]:
    """Every span of a trace, depth first in start order."""
    for r in roots:
        yield r
        yield from walk(r.children)


class TraceSummary(NamedTuple):
    """One ``otelmw traces list`` row."""

    trace_id: str
    start_ns: int
    end_ns: int
    service: str
    root: str
    spans: int
    errors: int

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)


def summarize(tid: str, roots: list[SpanView]) -> TraceSummary:
    spans = list(walk(roots))
    first = min(roots, key=lambda r: r.start_ns)
    return TraceSummary(
        trace_id=tid, start_ns=min(s.start_ns for s in spans),
        end_ns=max(s.end_ns for s in spans), service=first.service, root=first.name,
        spans=len(spans), errors=sum(1 for s in spans if s.status == "ERROR"))


def newest_first(traces: dict[str, list[SpanView]]) -> list[TraceSummary]:
    return sorted((summarize(t, r) for t, r in traces.items()),
                  key=lambda s: s.start_ns, reverse=True)


def format_duration(ns: int) -> str:
    """``0.38ms``, ``12.4ms``, ``3.21s``, ``2m05s``: short, fixed precision."""
    ms = ns / 1e6
    if ms < 10:
        return f"{ms:.2f}ms"
    if ms < 1000:
        return f"{ms:.1f}ms"
    if ms < 60_000:
        return f"{ms / 1000:.2f}s"
    minutes, seconds = divmod(int(ms // 1000), 60)
    return f"{minutes}m{seconds:02d}s"


def local_time(ns: int) -> str:
    """A start time in the local time zone, to the millisecond."""
    seconds = ns / 1e9
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))
    return f"{stamp}.{int(ns // 1_000_000 % 1000):03d}"


def _row(columns: list[tuple[str, int]], style: Style, sep: str = "  ") -> str:
    """Left-aligned cells (printable text, width); the last one unpadded."""
    parts = []
    for i, (text, width) in enumerate(columns):
        shown = fit(text, width)
        pad = "" if i == len(columns) - 1 else " " * (width - cells(shown))
        parts.append(shown + pad)
    return sep.join(parts).rstrip()


def render_list(summaries: list[TraceSummary], style: Style) -> list[str]:
    """A header and one row per trace: start (local), service, root, spans,
    errors, duration, trace id — fitted to ``style.width``."""
    header = ("STARTED", "SERVICE", "ROOT SPAN", "SPANS", "ERRORS", "DURATION", "TRACE ID")
    rows = [(local_time(s.start_ns), printable(s.service), printable(s.root), str(s.spans),
             str(s.errors), format_duration(s.duration_ns), s.trace_id) for s in summaries]
    widths = [max(cells(r[i]) for r in [header, *rows]) for i in range(len(header))]
    # The root span name gives way first when the line would not fit.
    over = sum(widths) + 2 * (len(widths) - 1) - style.width
    if over > 0:
        widths[2] = max(len(header[2]), widths[2] - over)
    out = [style.paint(_row(list(zip(header, widths, strict=True)), style), BOLD)]
    for s, r in zip(summaries, rows, strict=True):
        line = _row(list(zip(r, widths, strict=True)), style)
        if s.errors:
            start = line.index(r[4], sum(widths[:4]) + 8)
            line = (line[:start] + style.paint(r[4], RED) + line[start + len(r[4]):])
        tid_at = line.rfind(s.trace_id)
        out.append(line[:tid_at] + style.paint(s.trace_id, DIM))
    return out


def _value(v: Any) -> str:
    if isinstance(v, list):
        return ",".join(printable(x) for x in v)
    if isinstance(v, str) and v.startswith("sha256-keyed"):  # -sampled:, -prefix: too
        algorithm, _, hexdigest = v.partition(":")
        if len(hexdigest) > 16:  # nine hex digits are enough to tell digests apart
            return printable(f"{algorithm}:{hexdigest[:9]}") + "…"
    return printable(v)


class _Word(NamedTuple):
    text: str
    kind: str  # "", "id" (dim) or "event" (yellow)


def _words(s: SpanView, t0: int) -> list[_Word]:
    """The span's key attributes (``label=value``), then its hook events
    (``⚑name@offset``), as words to wrap."""
    words: list[_Word] = []
    for key, label in KEY_ATTRIBUTES.items():
        if key not in s.attributes:
            continue
        value = s.attributes[key]
        if key == "gen_ai.response.model" and s.name.endswith(f" {value}"):
            continue  # already in the span's name
        kind = "id" if key.endswith(".id") else ""
        words.extend(_Word(w, kind) for w in f"{label}={_value(value)}".split(" "))
    if s.status == "ERROR" and s.status_message and "error.type" not in s.attributes:
        words.extend(_Word(w, "") for w in f"status={printable(s.status_message)}".split(" "))
    for ev in s.events:
        name = ev.name.removeprefix("otelmw.hook.")
        extra = [f"{k.rsplit('.', 1)[-1]}={printable(ev.attributes[k])}"
                 for k in EVENT_ATTRIBUTES if ev.attributes.get(k) not in (None, 0, "ok")]
        text = f"⚑{printable(name)}@{format_duration(max(0, ev.time_ns - t0))}"
        words.append(_Word(text + (f"({','.join(extra)})" if extra else ""), "event"))
    return words


_WORD_COLORS: Final = {"id": DIM, "event": YELLOW}


def _paint_line(line: str, words: list[_Word], style: Style) -> str:
    if not style.color:
        return line
    kinds = {w.text: w.kind for w in words if w.kind}
    return " ".join(style.paint(w, _WORD_COLORS[kinds[w]]) if w in kinds else w
                    for w in line.split(" "))


def _content_lines(s: SpanView, width: int) -> list[str]:
    out = []
    items = [(k.split(".", 1)[-1], s.attributes[k]) for k in CONTENT_ATTRIBUTES
             if k in s.attributes]
    seen = {printable(v) for _, v in items}
    for ev in s.events:  # content in hook event bodies (EVENT_ONLY / SPAN_AND_EVENT)
        if isinstance(ev.body, dict):
            for k, v in ev.body.items():
                if printable(v) not in seen:  # post_tool_call repeats pre_tool_call's args
                    seen.add(printable(v))
                    items.append((f"{ev.name.rsplit('.', 1)[-1]}.{k}", v))
    for label, value in items:
        text = f"{label}: {printable(value)}"
        out.extend(wrap(text.split(" "), width, _CONTENT_LINES))
    return out


def _bar(s: SpanView, t0: int, total: int, width: int, style: Style) -> str:
    start = (s.start_ns - t0) * width / total
    end = (s.end_ns - t0) * width / total
    a = min(width - 1, max(0, int(start)))
    b = min(width, max(a + 1, round(end)))
    bar = "█" * (b - a)
    color = RED if s.status == "ERROR" else CYAN
    return " " * a + style.paint(bar, color) + " " * (width - b)


def render_waterfall(roots: list[SpanView], style: Style | None = None) -> list[str]:
    """The trace's rows, each at most ``style.width`` cells wide."""
    style = style or Style()
    spans = list(walk(roots))
    if not spans:
        return []
    t0 = min(s.start_ns for s in spans)
    total = max(1, max(s.end_ns for s in spans) - t0)
    rows = _tree_rows(roots)

    time_w = max(7, max(len(format_duration(s.end_ns - t0)) for s in spans))
    left = 2 * time_w + 3  # "START TOOK  "
    name_w = max(cells(r.branch + r.label + _mark(r.span)) for r in rows)
    # The name column yields to a bar of at least _BAR_MIN cells.
    name_w = max(16, min(name_w, style.width - left - _BAR_MIN - 5))
    bar_w = max(_BAR_MIN, min(40, (style.width - left - name_w - 5) // 5))
    attr_x = left + name_w + bar_w + 5  # after "  │bar│ "
    beside = style.width - attr_x >= _ATTR_MIN

    scale = fit(f"0 … {format_duration(total)}", bar_w)
    head = (f"{'START':>{time_w}} {'TOOK':>{time_w}}  {'SPAN':<{name_w}}  "
            f"│{scale:^{bar_w}}│")
    lines = [style.paint(fit(head, style.width), DIM)]
    for r in rows:
        s = r.span
        # a long name is elided (…) before its error mark is
        name = fit(r.branch + r.label, name_w - len(_mark(s))) + _mark(s)
        pad = " " * (name_w - cells(name))
        tree_part, name_part = name[: len(r.branch)], name[len(r.branch):]
        if s.status == "ERROR":
            name_part = style.paint(name_part, RED)
        row = (f"{format_duration(s.start_ns - t0):>{time_w}} "
               f"{format_duration(s.end_ns - s.start_ns):>{time_w}}  "
               f"{style.paint(tree_part, DIM)}{name_part}{pad}  "
               f"│{_bar(s, t0, total, bar_w, style)}│")
        words = _words(s, t0)
        indent = " " * left + r.under + "  "
        body_w = style.width - cells(indent)
        texts = [w.text for w in words]
        attr_lines = wrap(texts, style.width - attr_x if beside else body_w, _ATTR_LINES)
        if beside and attr_lines:
            lines.append(row + " " + _paint_line(attr_lines[0], words, style))
            cont = " " * left + r.under
            cont += " " * (attr_x - cells(cont))
            lines.extend(style.paint(cont, DIM) + _paint_line(x, words, style)
                         for x in attr_lines[1:])
        else:
            lines.append(row)
            lines.extend(style.paint(indent, DIM) + _paint_line(x, words, style)
                         for x in attr_lines)
        lines.extend(style.paint(indent, DIM) + style.paint(x, GREEN)
                     for x in _content_lines(s, body_w))
    return lines


def _mark(s: SpanView) -> str:
    return " [ERROR]" if s.status == "ERROR" else ""


class _TreeRow(NamedTuple):
    span: SpanView
    branch: str  # tree glyphs before the name ("│  ├─ ")
    label: str  # printable name
    under: str  # tree glyphs for the rows under the span (attributes, events)


def _tree_rows(roots: list[SpanView]) -> list[_TreeRow]:
    rows: list[_TreeRow] = []

    def visit(s: SpanView, prefix: str, last: bool, depth: int) -> None:
        branch = prefix + ("" if depth == 0 else ("└─ " if last else "├─ "))
        # the prefix of this span's children: the parent's, plus a rule while
        # siblings follow
        inner = "" if depth == 0 else prefix + ("   " if last else "│  ")
        rows.append(_TreeRow(s, branch, printable(s.name),
                             inner + ("│  " if s.children else "")))
        for i, c in enumerate(s.children):
            visit(c, inner, i == len(s.children) - 1, depth + 1)

    for r in roots:
        visit(r, "", True, 0)
    return rows


def render_trace(tid: str, roots: list[SpanView], style: Style | None = None) -> str:
    """``trace <id>`` and a one-line summary, then the waterfall."""
    style = style or Style()
    s = summarize(tid, roots)
    facts = [printable(s.service) or "?", f"{s.spans} spans",
             f"{s.errors} error{'s' if s.errors != 1 else ''}",
             format_duration(s.duration_ns), local_time(s.start_ns)]
    title = style.paint("trace ", BOLD) + style.paint(tid, DIM)
    summary = fit("  ".join(facts), style.width)
    if s.errors:
        summary = summary.replace(facts[2], style.paint(facts[2], RED), 1)
    return "\n".join([title, style.paint(summary, MAGENTA) if not s.errors else summary,
                      *render_waterfall(roots, style)])
