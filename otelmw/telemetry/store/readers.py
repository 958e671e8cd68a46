"""Reading the store back: every usable export request, the unusable lines named.

A line that is not JSON (torn by a crash, corrupted) or not an export request of
its signal is skipped and reported (``SkippedLine``); every other line is read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from .files import data_dir, file_order


class SkippedLine(NamedTuple):
    """A stored line a reader could not use: where it is and why."""

    path: Path
    line: int  # 1-based
    reason: str


# signal → (resource list key, scope list key, item list key) of its export request
_LAYOUT = {"traces": ("resourceSpans", "scopeSpans", "spans"),
           "logs": ("resourceLogs", "scopeLogs", "logRecords"),
           "metrics": ("resourceMetrics", "scopeMetrics", "metrics")}
_VALUE_KEYS = frozenset({"stringValue", "boolValue", "intValue", "doubleValue", "arrayValue",
                         "kvlistValue", "bytesValue"})


def _int_like(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, str) and value.isdigit())


def _any_value_problem(value: Any, depth: int = 0) -> str | None:
    if not isinstance(value, dict) or depth > 64:
        return "an attribute value is not an OTLP AnyValue"
    for key in _VALUE_KEYS & value.keys():
        inner = value[key]
        if key in ("arrayValue", "kvlistValue"):
            items = inner.get("values", []) if isinstance(inner, dict) else None
            if not isinstance(items, list):
                return f"{key} is not a list of values"
            for item in items:
                problem = (_attributes_problem([item], depth + 1) if key == "kvlistValue"
                           else _any_value_problem(item, depth + 1))
                if problem:
                    return problem
        elif key == "intValue" and not (_int_like(inner) or (
                isinstance(inner, str) and inner.lstrip("-").isdigit())):
            return "intValue is not an integer"
        elif key == "doubleValue" and not isinstance(inner, int | float | str):
            return "doubleValue is not a number"
    return None


def _attributes_problem(attrs: Any, depth: int = 0) -> str | None:
    if not isinstance(attrs, list):
        return "attributes is not a list"
    for kv in attrs:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            return "an attribute has no string key"
        problem = _any_value_problem(kv.get("value", {}), depth)
        if problem:
            return problem
    return None


def _span_problem(span: dict[str, Any]) -> str | None:
    for key in ("traceId", "spanId", "parentSpanId", "name"):
        if not isinstance(span.get(key, ""), str):
            return f"a span's {key} is not a string"
    for key in ("startTimeUnixNano", "endTimeUnixNano"):
        if key in span and not _int_like(span[key]):
            return f"a span's {key} is not an integer"
    status = span.get("status", {})
    if not isinstance(status, dict) or not isinstance(status.get("code", 0), int | str):
        return "a span's status is malformed"
    return None


def request_problem(signal: str, request: Any) -> str | None:
    """Why ``request`` is not a usable OTLP/JSON export request of ``signal``
    (containers, ids, times and attributes as readers use them), or None."""
    if not isinstance(request, dict):
        return f"a JSON {type(request).__name__}, not an export request"
    top, scope_key, item_key = _LAYOUT[signal]
    resources = request.get(top, [])
    if not isinstance(resources, list):
        return f"{top} is not a list"
    for res in resources:
        if not isinstance(res, dict):
            return f"an entry of {top} is not an object"
        resource = res.get("resource", {})
        problem = (_attributes_problem(resource.get("attributes", []))
                   if isinstance(resource, dict) else "resource is not an object")
        if problem:
            return problem
        scopes = res.get(scope_key, [])
        if not isinstance(scopes, list) or not all(isinstance(x, dict) for x in scopes):
            return f"{scope_key} is not a list of objects"
        for scope in scopes:
            items = scope.get(item_key, [])
            if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
                return f"{item_key} is not a list of objects"
            for item in items:
                problem = _attributes_problem(item.get("attributes", [])) or (
                    _span_problem(item) if signal == "traces" else None)
                if problem:
                    return problem
    return None


_DECODER = json.JSONDecoder()


def _salvage(signal: str, line: str) -> dict[str, Any] | None:
    """A complete request at the end of a line that starts with a torn one (a write
    cut short, then the next appended to it)."""
    marker = '{"' + _LAYOUT[signal][0] + '"'
    start = line.find(marker, 1)
    while start != -1:
        try:
            request, end = _DECODER.raw_decode(line, start)
        except (ValueError, RecursionError):
            request, end = None, -1
        if end == len(line) and request_problem(signal, request) is None:
            return request  # type: ignore[no-any-return]
        start = line.find(marker, start + 1)
    return None


class StoredRequest(NamedTuple):
    path: Path
    line: int  # 1-based
    request: dict[str, Any]


def read_requests(signal: str, directory: Path | None = None,
                  skipped: list[SkippedLine] | None = None) -> Iterator[dict[str, Any]]:
    """Yield every stored export request (as OTLP-JSON dicts), oldest file first.

    A line that is not JSON (torn by a crash, corrupted) or not an export request
    of this signal is skipped and, when ``skipped`` is given, appended to it; every
    other line is still read (``describe_skipped`` words the list for a user)."""
    for stored in read_stored(signal, directory, skipped):
        yield stored.request


def read_stored(signal: str, directory: Path | None = None,
                skipped: list[SkippedLine] | None = None) -> Iterator[StoredRequest]:
    """``read_requests`` with where each request was read from."""
    d = directory if directory is not None else data_dir()
    for path in sorted(d.glob(f"{signal}-*.jsonl"), key=file_order):
        try:
            fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
        except OSError:  # pruned meanwhile by a running writer
            continue
        with fh:
            for number, raw in enumerate(fh, 1):
                line = raw.strip()
                if not line:
                    continue
                try:
                    request = json.loads(line)
                except (ValueError, RecursionError):
                    request = _salvage(signal, line)
                    if skipped is not None:
                        skipped.append(SkippedLine(path, number, (
                            "not JSON (torn or corrupt)" if request is None else
                            "a torn request; the complete one after it was kept")))
                    if request is not None:
                        yield StoredRequest(path, number, request)
                    continue
                problem = request_problem(signal, request)
                if problem is None:
                    yield StoredRequest(path, number, request)
                elif skipped is not None:
                    skipped.append(SkippedLine(path, number, problem))


def describe_skipped(skipped: Sequence[SkippedLine]) -> str:
    """One line for a user: how many lines were skipped, in which files, which and why."""
    by_file: dict[Path, list[SkippedLine]] = {}
    for item in skipped:
        by_file.setdefault(item.path, []).append(item)
    parts = []
    for path, items in by_file.items():
        shown = ", ".join(f"line {x.line} ({x.reason})" for x in items[:5])
        more = f", and {len(items) - 5} more" if len(items) > 5 else ""
        parts.append(f"{path}: {shown}{more}")
    return (f"otelmw: skipped {len(skipped)} unreadable line(s) of the store, every other "
            f"line was read: " + "; ".join(parts))
