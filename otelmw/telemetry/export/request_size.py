"""Export requests a collector accepts: each one kept under a byte bound.

A collector refuses a whole request above its receive limit (gRPC's default is
4 MiB: ``Received message larger than max``), so a batch of 512 heavy spans — 32
metadata strings of 256 characters each, well within otelmw's documented bounds —
used to cost the whole batch. The export guard splits each batch into requests
whose protobuf encoding stays under the bound it was given (``configure()`` hands it
``OTELMW_EXPORT_MAX_BYTES``, default 3 MiB). Sizes are estimated from above without
encoding (string lengths plus the worst-case protobuf framing of each field), one pass
over each item.

A span that alone exceeds a quarter of the bound is shrunk: every string cut to
``SHRUNK_TEXT`` characters, events and links kept while they fit, and marked
``otelmw.export.truncated``. What still cannot fit (a log record, or a span that
is too large even shrunk) is dropped and counted (reason ``too_large``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ...config import settings as cfg
from ..attributes import OTELMW_EXPORT_TRUNCATED as TRUNCATED

DEFAULT_MAX_REQUEST_BYTES: int = cfg.EXPORT_MAX_BYTES.default
SHRUNK_TEXT = 256

# Upper bounds of the protobuf framing (tags, length varints, fixed fields).
ATTRIBUTE = 16  # KeyValue + AnyValue framing, ids of the key and value lengths
NUMBER = 11  # a varint / fixed64 value with its tag
_ITEM = 8  # one AnyValue inside an ArrayValue / KeyValueList
SPAN = 192  # ids, times, kind, flags, status code, dropped counts, message framing
EVENT = 40
LINK = 72
_LOG = 128  # times, severity, flags, ids, framing
_SCOPE = 128  # a new ScopeSpans / ScopeLogs group (+ its name and version)
_REQUEST = 1024  # request and resource framing, schema URLs


def text_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "replace"))


def value_size(value: Any) -> int:
    t = type(value)
    if t is str:
        return len(value) if value.isascii() else text_size(value)
    if t is int or t is float or t is bool or value is None:
        return NUMBER
    if isinstance(value, bytes | bytearray):
        return len(value) + _ITEM
    if isinstance(value, list | tuple):
        return sum(value_size(v) + _ITEM for v in value) + _ITEM
    if isinstance(value, dict):
        return attrs_size(value) + _ITEM
    return text_size(str(value))


def attrs_size(attrs: Any) -> int:
    if not attrs:
        return 0
    n = 0
    for k, v in attrs.items():  # inlined fast path: ASCII keys and strings, numbers
        n += (len(k) if type(k) is str and k.isascii() else value_size(k)) + ATTRIBUTE
        t = type(v)
        if t is str and v.isascii():
            n += len(v)
        elif t is int or t is float or t is bool:
            n += NUMBER
        else:
            n += value_size(v)
    return n


def _scope_key(scope: Any) -> tuple[str, str]:
    if scope is None:
        return ("", "")
    return (scope.name or "", scope.version or "")


def span_frame_size(span: Any) -> int:
    """A span's size without its attributes and events: framing, name, status,
    trace state, links."""
    status = span.status.description
    n = SPAN + text_size(span.name or "")
    if status:
        n += text_size(status)
    state = span.context.trace_state if span.context is not None else None
    if state:
        n += len(state.to_header())
    for link in span.links:
        n += LINK + attrs_size(link.attributes)
    return n


def span_size(span: Any) -> int:
    n = span_frame_size(span) + attrs_size(span.attributes)
    for e in span.events:
        n += EVENT + text_size(e.name or "") + attrs_size(e.attributes)
    return n


def log_size(item: Any) -> int:
    rec = item.log_record
    return (_LOG + value_size(rec.body) + attrs_size(rec.attributes)
            + text_size(rec.event_name or "") + text_size(rec.severity_text or ""))


def _request_overhead(item: Any) -> int:
    resource = getattr(item, "resource", None)
    return _REQUEST + (attrs_size(resource.attributes) if resource is not None else 0)


class Split(NamedTuple):
    """A batch cut into requests under the bound, and what could not fit at all."""

    requests: list[list[Any]]
    too_large: list[Any]


def split(sized: Sequence[tuple[Any, int]], size_of: Callable[[Any], int],
          shrink: Callable[[Any, int], Any] | None,
          limit: int = DEFAULT_MAX_REQUEST_BYTES) -> Split:
    """The ``(item, estimated size)`` pairs' items in order, cut where the next item
    would take the request over ``limit``; an item above a quarter of the limit is
    shrunk (``shrink(item, quarter)``, then sized with ``size_of``) or, when that is
    not enough or not possible, set apart."""
    if not sized:
        return Split([], [])
    overhead = _request_overhead(sized[0][0])
    item_limit = max(1, limit // 4)
    requests: list[list[Any]] = []
    too_large: list[Any] = []
    current: list[Any] = []
    size = overhead
    scopes: set[tuple[str, str]] = set()
    last_obj: Any = object()
    scope = ("", "")
    for item, n in sized:
        if n > item_limit:
            shrunk = shrink(item, item_limit) if shrink is not None else None
            n = size_of(shrunk) if shrunk is not None else 0
            if shrunk is None or n > item_limit:
                too_large.append(item)
                continue
            item = shrunk
        scope_obj = getattr(item, "instrumentation_scope", None)
        if scope_obj is not last_obj:  # a batch mostly comes from one or two scopes
            last_obj, scope = scope_obj, _scope_key(scope_obj)
        extra = 0 if scope in scopes else _SCOPE + len(scope[0]) + len(scope[1])
        if current and size + n + extra > limit:
            requests.append(current)
            current, size, scopes = [], overhead, set()
            extra = _SCOPE + len(scope[0]) + len(scope[1])
        current.append(item)
        scopes.add(scope)
        size += n + extra
    if current:
        requests.append(current)
    return Split(requests, too_large)


def _short(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= SHRUNK_TEXT else value[: SHRUNK_TEXT - 1] + "…"
    if isinstance(value, list | tuple):
        return type(value)(_short(v) for v in value)
    if isinstance(value, dict):
        return {k: _short(v) for k, v in value.items()}
    return value


def shrink_span(span: Any, budget: int) -> Any:
    """A copy of ``span`` with every string cut to ``SHRUNK_TEXT`` characters and
    events/links kept (in order) while the span stays within ``budget`` bytes (a
    quarter of the request bound); marked ``otelmw.export.truncated``."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Link, Status

    attrs = _short(dict(span.attributes or {}))
    attrs[TRUNCATED] = True
    status = span.status
    name = _short(span.name)
    used = SPAN + text_size(name) + attrs_size(attrs) + text_size(
        _short(status.description or ""))
    events = []
    for e in span.events:
        ev = Event(_short(e.name), _short(dict(e.attributes or {})), e.timestamp)
        cost = EVENT + text_size(ev.name) + attrs_size(ev.attributes)
        if used + cost > budget:
            break
        events.append(ev)
        used += cost
    links = []
    for link in span.links:
        ln = Link(link.context, _short(dict(link.attributes or {})))
        cost = LINK + attrs_size(ln.attributes)
        if used + cost > budget:
            break
        links.append(ln)
        used += cost
    return ReadableSpan(
        name=name, context=span.context, parent=span.parent, resource=span.resource,
        attributes=attrs, events=events, links=links, kind=span.kind,
        status=Status(status.status_code, _short(status.description)),
        start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope)
