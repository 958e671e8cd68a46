"""Host adapters reach the core only through its public API (``otelmw.core.__all__``)
and never drive the observer themselves.

Every module under ``otelmw/instrumentation/`` and ``otelmw/decorators.py`` is read
(its AST, lazy and ``TYPE_CHECKING`` imports included): an import from ``otelmw.core``
must name only what ``otelmw.core.__all__`` lists (no ``otelmw.core.<module>`` import,
no private name), and no code may call a method of the observer protocol
(``PipelineObserver``) or touch a pipeline's ``observer``.
"""

from __future__ import annotations

import ast
import inspect
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import otelmw.core
from otelmw.core import PipelineObserver

PACKAGE = Path(otelmw.core.__file__).resolve().parent.parent
ADAPTERS = [*sorted((PACKAGE / "instrumentation").rglob("*.py")), PACKAGE / "decorators.py"]
OBSERVER_METHODS = frozenset(
    name for name, value in vars(PipelineObserver).items()
    if not name.startswith("_") and inspect.isfunction(value))


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(
        ".__init__")


def _resolved(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names."""
    if not node.level:
        return node.module or ""
    package = _module_of(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def violations(path: Path, source: str | None = None) -> list[str]:
    found: list[str] = []
    public = set(otelmw.core.__all__)
    text = source if source is not None else path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(text)):
        where = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names
                      if a.name.startswith("otelmw.core")]
        elif isinstance(node, ast.ImportFrom):
            module = _resolved(path, node)
            if module.startswith("otelmw.core."):
                found.append(f"{where}: from {module} import ...")
            elif module == "otelmw.core":
                found += [f"{where}: otelmw.core.{a.name} is not in otelmw.core.__all__"
                          for a in node.names if a.name not in public]
        elif isinstance(node, ast.Attribute):
            if node.attr == "observer":
                found.append(f"{where}: .observer")
            elif node.attr in OBSERVER_METHODS:
                found.append(f"{where}: .{node.attr} (an observer method)")
    return found


def test_the_rule_sees_what_it_forbids() -> None:
    # the check itself, on a module placed as a host package's adapter would be
    probe = PACKAGE / "instrumentation" / "somehost" / "calls.py"
    found = violations(probe, "from ...core.calls import tool_in_flight\n"
                              "from ...core import contract\n"
                              "from ...core import get_pipeline, open_call\n"
                              "import otelmw.core.pipeline\n"
                              "get_pipeline().observer.call_started(None, None)\n")
    # a core module, a name not in __all__, a plain import, .observer, an observer method
    assert len(found) == 5, found


@pytest.mark.parametrize("path", ADAPTERS, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_adapters_use_only_the_public_core_api(path: Path) -> None:
    assert violations(path) == []


def test_the_public_api_and_the_seam_are_typed_without_any() -> None:
    # the host API's and the observer protocol's signatures say what payloads, tokens,
    # attributes and results are
    from otelmw.core import host, seam

    for name in [*host.__all__, "seam.PipelineObserver"]:
        value = seam.PipelineObserver if name.startswith("seam.") else getattr(host, name)
        members = [value] if inspect.isfunction(value) else [
            m for n, m in vars(value).items() if inspect.isfunction(m) and (
                not n.startswith("_") or n == "__init__")] if inspect.isclass(value) else []
        for member in members:
            if member.__name__ == "_no_init_or_replace_init":  # a Protocol's own __init__
                continue
            annotations = inspect.get_annotations(member)
            assert annotations, f"{name}.{member.__name__} has no annotations"
            assert not [k for k, v in annotations.items() if "Any" in str(v)], (
                f"{name}.{member.__name__}: {annotations}")


class Recorder:
    """An observer that records what the host API reported through the seam."""

    def __init__(self, hook_events: str = "registered") -> None:
        self.hook_events = hook_events
        self.seen: list[tuple[str, object]] = []

    def __getattr__(self, name: str) -> object:
        if name not in OBSERVER_METHODS:
            raise AttributeError(name)

        def record(*args: object) -> object:
            self.seen.append((name, args[1] if len(args) > 1 else None))
            return args[1] if name in ("call_finished", "call_enriched") else "token"

        return record


def test_a_host_call_reports_what_the_host_observed_through_the_seam() -> None:
    from otelmw.core import (
        CallInfo,
        NormalizedToolResult,
        Pipeline,
        current_tool_call,
        enrich_llm_call,
        host_layer,
        open_call,
        tool_call_current,
        unopened_call,
    )

    pipe, obs = Pipeline(), Recorder()
    call = CallInfo(operation="execute_tool", tool_name="lookup", tool_call_id="t1")
    assert not open_call(call, {"q": 1}, pipe).observed  # no observer: nothing reported
    pipe.observer = obs  # type: ignore[assignment]
    opened = open_call(call, {"q": 1}, pipe)
    layer = host_layer("tool_request", test_the_rule_sees_what_it_forbids, "host-plugin")
    opened.rewrite_layer(layer, 0, {"q": 1}).end_rewrite("rewritten", changed=["q"],
                                                         payload={"q": 2})
    opened.wrapper_layer(layer, 0, {"q": 2}).end_wrapper("passed", result="r")
    opened.report_hook_firing("pre_tool_call", {"args": {"q": 2}}, 0)
    with tool_call_current(opened):  # a nested tool protocol finds the call in flight
        assert current_tool_call() is opened
        opened.report_tool_result(NormalizedToolResult(content="r"), "ok")
    assert current_tool_call() is None
    assert opened.finish("r") == "r"
    assert [name for name, _ in obs.seen] == [
        "call_started", "rewrite_started", "rewrite_finished", "wrapper_started",
        "wrapper_finished", "hook_fired", "tool_result", "call_finished"]
    assert layer.name == "host-plugin.test_the_rule_sees_what_it_forbids"
    # hook events "none": a host's firing is not reported
    quiet = Recorder("none")
    pipe.observer = quiet  # type: ignore[assignment]
    unopened_call(call, pipe).report_hook_firing("pre_tool_call", {}, 0)
    assert quiet.seen == []
    assert enrich_llm_call(call, "raw", None, None, pipe) == "raw"
    assert quiet.seen == [("call_enriched", "raw")]


def test_a_nested_tool_protocol_enriches_the_tool_call_the_pipeline_runs() -> None:
    # an MCP client inside a framework's tool: the pipeline's own tool call is the call
    # in flight (only while the tool runs), and the protocol's attributes go through
    # the seam to it
    import asyncio

    from otelmw.core import Pipeline, current_tool_call, enrich_tool_call

    pipe, obs = Pipeline(), Recorder()
    pipe.observer = obs  # type: ignore[assignment]
    seen: list[object] = []

    def tool(args: object) -> str:
        running = current_tool_call()
        assert running is not None
        seen.append(running.call.tool_name)
        enrich_tool_call(running, {"mcp.method.name": "tools/call"})
        return "r"

    async def atool(args: object) -> str:
        await asyncio.sleep(0)
        return tool(args)

    assert current_tool_call() is None
    assert pipe.run_tool("lookup", {"q": 1}, tool, tool_call_id="t1") == "r"
    assert asyncio.run(pipe.arun_tool("alookup", {"q": 1}, atool)) == "r"
    assert current_tool_call() is None  # only while the tool ran
    assert seen == ["lookup", "alookup"]
    enriched = [payload for name, payload in obs.seen if name == "tool_enriched"]
    assert enriched == [{"mcp.method.name": "tools/call"}] * 2
    # an observer written before the method: nothing is reported, nothing raises
    older = OlderRecorder()
    pipe.observer = older  # type: ignore[assignment]
    assert pipe.run_tool("lookup", {"q": 1}, tool) == "r"
    assert [name for name, _ in older.seen] == ["call_started", "tool_result", "call_finished"]


class OlderRecorder(Recorder):
    """An observer from before ``tool_enriched`` was part of the protocol."""

    def __getattr__(self, name: str) -> object:
        if name == "tool_enriched":
            raise AttributeError(name)
        return super().__getattr__(name)


@pytest.fixture()
def global_failures() -> Iterator[Counter[tuple[str, str, str]]]:
    """The process pipeline's failure counts, put back as they were after the test (a
    count left behind fails the modules that require none)."""
    from otelmw.core import get_pipeline

    counts = get_pipeline().failures.counts
    saved = Counter(counts)
    try:
        yield counts
    finally:
        counts.clear()
        counts.update(saved)


def test_host_outcome_fails_open_without_running_the_host_call_twice(
        global_failures: Counter[tuple[str, str, str]]) -> None:
    """``HostOutcome``: the pipeline around a host's own function raised. The host's
    error is re-raised as it was; an error of otelmw's is counted, and the host's call
    runs then only if it had not run (its result or its error stands otherwise)."""
    import asyncio

    from otelmw.core import HostOutcome

    counts = global_failures
    before = sum(counts.values())
    ran: list[object] = []

    def host(x: int) -> int:
        ran.append(x)
        return x * 2

    def boom(x: int) -> int:
        raise KeyError("host's own")

    def run(out: HostOutcome, fn: object, otelmw_fails: str) -> object:
        """A pipeline that fails ``before``/``after`` the base call, or not at all."""
        try:
            if otelmw_fails == "before":
                raise RuntimeError("otelmw's")
            result = out.call(fn, 21)  # type: ignore[arg-type]
            if otelmw_fails == "after":
                raise RuntimeError("otelmw's")
            return result
        except BaseException as exc:
            if out.recover(exc, "test"):
                return ("again", host(21))
            return ("stood", out.result)

    assert run(HostOutcome("t"), host, "") == 42 and ran == [21]
    assert run(HostOutcome("t"), host, "before") == ("again", 42) and ran == [21, 21]
    assert run(HostOutcome("t"), host, "after") == ("stood", 42) and ran == [21] * 3
    with pytest.raises(KeyError, match="host's own"):  # the host's own error, as raised
        run(HostOutcome("t"), boom, "")
    out = HostOutcome("t")
    with pytest.raises(KeyError):  # otelmw failed after the host raised: the host's error
        try:
            out.call(boom, 1)
        except KeyError:
            out.recover(RuntimeError("otelmw's"), "test")
    swallowed = HostOutcome("t")
    swallowed.result, swallowed.swallowed, swallowed.executed = "error dict", True, True
    swallowed.error = KeyError("answered, not raised")
    assert swallowed.recover(swallowed.error, "test") is False
    assert swallowed.result == "error dict"
    assert sum(counts.values()) == before + 3  # before, after, after the host's error

    async def twice(x: int) -> int:
        return x * 2

    aout = HostOutcome("t")
    assert asyncio.run(aout.acall(twice, 4)) == 8 and aout.executed and aout.result == 8
