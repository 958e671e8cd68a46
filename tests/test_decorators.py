"""``llm_adapter``, ``tool_dispatcher``, ``agent_turn`` and ``wrap_*``/``unwrap``:
functions, methods (class and instance access), ``async def``, generator and
async generator functions, asserted on the exported spans.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.telemetry import TelemetryHarness, is_child, is_error, is_unset
from opentelemetry.trace import SpanKind

from otelmw.decorators import (
    agent_turn,
    llm_adapter,
    tool_dispatcher,
    unwrap,
    wrap_llm_adapter,
    wrap_tool_dispatcher,
)

pytestmark = pytest.mark.timeout(60)

MODEL = "gpt-deco"
RESPONSE = {"id": "chatcmpl-d", "model": MODEL, "choices": [{"finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 6}}


def chunks() -> list[dict[str, Any]]:
    return [{"id": "s1", "model": MODEL, "choices": [{"delta": {"content": "a"}}]},
            {"id": "s1", "model": MODEL, "choices": [{"delta": {}, "finish_reason": "stop"}]},
            {"id": "s1", "choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 3}}]


def assert_chat(h: TelemetryHarness, provider: str = "openai") -> Any:
    span = h.one(f"chat {MODEL}")
    assert span.kind is SpanKind.CLIENT
    assert span.attributes["gen_ai.provider.name"] == provider
    assert span.attributes["gen_ai.request.model"] == MODEL
    return span


# ---------------------------------------------------------------- llm_adapter
def test_llm_adapter_plain_function_kwargs(h: TelemetryHarness) -> None:
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    @llm_adapter(provider="openai", server_address="api.openai.com", server_port=443,
                 pipeline=h.pipeline)
    def create(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return RESPONSE

    assert create.__name__ == "create"
    assert create("positional", model=MODEL, messages=[{"role": "user", "content": "hi"}]) \
        is RESPONSE
    assert calls == [(("positional",), {"model": MODEL,
                                        "messages": [{"role": "user", "content": "hi"}]})]
    span = assert_chat(h)
    assert span.attributes["server.address"] == "api.openai.com"
    assert span.attributes["server.port"] == 443
    assert span.attributes["gen_ai.usage.output_tokens"] == 6


def test_llm_adapter_rewrite_reaches_the_function(h: TelemetryHarness) -> None:
    def route(**kw: Any) -> Any:
        return {"request": {**kw["request"], "model": "gpt-routed"}, "reason": "cheaper"}

    h.pipeline.registry.add_middleware("llm_request", route, plugin="router")
    seen: list[dict[str, Any]] = []

    @llm_adapter(pipeline=h.pipeline)
    def create(**kwargs: Any) -> Any:
        seen.append(kwargs)
        return RESPONSE

    create(model=MODEL, temperature=0.2)
    assert seen == [{"model": "gpt-routed", "temperature": 0.2}]
    # The chat span describes the request that was sent; the model asked for is kept.
    chat = h.one("chat gpt-routed")
    assert is_child(h.one("llm_request router.route"), chat)
    assert chat.attributes["gen_ai.request.model"] == "gpt-routed"
    assert chat.attributes["otelmw.request.original_model"] == MODEL


class Client:
    def __init__(self, name: str) -> None:
        self.name = name

    @llm_adapter(provider="anthropic")
    def create(self, **kwargs: Any) -> Any:
        return {"owner": self.name, "kwargs": kwargs, "id": "msg_1", "model": MODEL,
                "stop_reason": "end_turn"}


def test_llm_adapter_on_method_instance_and_class_access(h: TelemetryHarness,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import otelmw.decorators as deco

    monkeypatch.setattr(deco, "get_pipeline", lambda: h.pipeline)
    client = Client("c1")
    out = client.create(model=MODEL, max_tokens=10)
    assert out["owner"] == "c1"
    assert out["kwargs"] == {"model": MODEL, "max_tokens": 10}
    out2 = Client.create(Client("c2"), model=MODEL)  # class access, instance passed
    assert out2["owner"] == "c2" and out2["kwargs"] == {"model": MODEL}
    spans = h.named(f"chat {MODEL}")
    assert len(spans) == 2
    for span in spans:
        assert span.attributes["gen_ai.provider.name"] == "anthropic"
        # Anthropic's end_turn in the conventions' values, as the official instrumentation maps it
        assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)


def test_llm_adapter_on_method_with_explicit_pipeline(h: TelemetryHarness) -> None:
    class Local:
        def __init__(self) -> None:
            self.calls = 0

        @llm_adapter(pipeline=h.pipeline)
        def create(self, **kwargs: Any) -> Any:
            self.calls += 1
            return {**RESPONSE, "self": self}

    obj = Local()
    assert obj.create(model=MODEL)["self"] is obj
    assert Local.create(obj, model=MODEL)["self"] is obj
    assert obj.calls == 2
    assert len(h.named(f"chat {MODEL}")) == 2


def test_llm_adapter_async_def(h: TelemetryHarness) -> None:
    @llm_adapter(provider="openai", pipeline=h.pipeline)
    async def acreate(**kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return {**RESPONSE, "echo": kwargs}

    assert inspect.iscoroutinefunction(acreate)
    out = asyncio.run(acreate(model=MODEL, stream=False))
    assert out["echo"] == {"model": MODEL, "stream": False}
    span = assert_chat(h)
    assert span.attributes["gen_ai.response.id"] == "chatcmpl-d"
    assert is_unset(span)


def test_llm_adapter_async_method(h: TelemetryHarness) -> None:
    class AsyncClient:
        @llm_adapter(pipeline=h.pipeline)
        async def create(self, **kwargs: Any) -> Any:
            return {**RESPONSE, "self": self}

    c = AsyncClient()
    assert asyncio.run(c.create(model=MODEL))["self"] is c
    assert_chat(h, provider="unknown")


def test_llm_adapter_error_propagates_and_marks_span(h: TelemetryHarness) -> None:
    @llm_adapter(pipeline=h.pipeline)
    def create(**kwargs: Any) -> Any:
        raise TimeoutError("slow")

    with pytest.raises(TimeoutError):
        create(model=MODEL)
    span = h.one(f"chat {MODEL}")
    assert is_error(span) and span.attributes["error.type"] == "builtins.TimeoutError"


def test_llm_adapter_generator_function_stream(h: TelemetryHarness) -> None:
    @llm_adapter(provider="openai", pipeline=h.pipeline)
    def stream(**kwargs: Any) -> Iterator[Any]:
        yield from chunks()

    s = stream(model=MODEL, stream=True)
    assert h.named(f"chat {MODEL}") == []  # passes through unconsumed
    first = next(s)
    assert first == chunks()[0]
    assert h.named(f"chat {MODEL}") == []
    assert [first, *s] == chunks()
    span = assert_chat(h)
    assert span.attributes["otelmw.stream.ended_by"] == "exhausted"
    assert span.attributes["gen_ai.usage.input_tokens"] == 2
    assert span.attributes["gen_ai.usage.output_tokens"] == 3
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)


def test_llm_adapter_async_generator_function_stream(h: TelemetryHarness) -> None:
    @llm_adapter(provider="openai", pipeline=h.pipeline)
    async def astream(**kwargs: Any) -> AsyncIterator[Any]:
        for c in chunks():
            await asyncio.sleep(0)
            yield c

    async def main() -> list[Any]:
        s = astream(model=MODEL)
        assert h.named(f"chat {MODEL}") == []
        out = [c async for c in s]
        return out

    assert asyncio.run(main()) == chunks()
    span = assert_chat(h)
    assert span.attributes["otelmw.stream.ended_by"] == "exhausted"
    assert span.attributes["gen_ai.usage.output_tokens"] == 3


def test_llm_adapter_async_def_returning_async_iterator(h: TelemetryHarness) -> None:
    async def gen() -> AsyncIterator[Any]:
        for c in chunks():
            yield c

    @llm_adapter(pipeline=h.pipeline)
    async def create(**kwargs: Any) -> Any:
        return gen()

    async def main() -> list[Any]:
        s = await create(model=MODEL, stream=True)
        return [c async for c in s]

    assert asyncio.run(main()) == chunks()
    assert h.one(f"chat {MODEL}").attributes["otelmw.stream.ended_by"] == "exhausted"


# ---------------------------------------------------------------- tool_dispatcher
def test_tool_dispatcher_function_positional_and_keyword(h: TelemetryHarness) -> None:
    got: list[tuple[Any, Any, Any]] = []

    @tool_dispatcher(pipeline=h.pipeline)
    def dispatch(tool_name: str, args: dict[str, Any], tool_call_id: str | None = None) -> Any:
        got.append((tool_name, args, tool_call_id))
        return f"{tool_name}:{args['city']}"

    assert dispatch("weather", {"city": "Oslo"}, "call-1") == "weather:Oslo"
    assert dispatch(tool_name="weather", args={"city": "Rome"}, tool_call_id="call-2") == (
        "weather:Rome")
    assert dispatch("weather", args='{"city": "Nice"}') == "weather:Nice"  # JSON string args
    assert got == [("weather", {"city": "Oslo"}, "call-1"),
                   ("weather", {"city": "Rome"}, "call-2"),
                   ("weather", {"city": "Nice"}, None)]
    spans = h.named("execute_tool weather")
    assert len(spans) == 3
    assert [s.attributes.get("gen_ai.tool.call.id") for s in spans] == ["call-1", "call-2",
                                                                        None]
    assert all(s.kind is SpanKind.INTERNAL for s in spans)


def test_tool_dispatcher_effective_args_reach_dispatcher(h: TelemetryHarness) -> None:
    def clamp(**kw: Any) -> Any:
        return {"args": {**kw["args"], "limit": 10}, "reason": "clamp"}

    h.pipeline.registry.add_middleware("tool_request", clamp, plugin="guard")
    got: list[Any] = []

    @tool_dispatcher(pipeline=h.pipeline)
    def dispatch(tool_name: str, args: dict[str, Any], tool_call_id: str | None = None) -> Any:
        got.append(args)
        return "ok"

    dispatch("search", {"q": "x", "limit": 1000})
    dispatch(tool_name="search", args={"q": "y"})
    assert got == [{"q": "x", "limit": 10}, {"q": "y", "limit": 10}]
    assert all(type(a) is dict for a in got)  # plain mutable dicts, not read-only views
    for span in h.named("tool_request guard.clamp"):
        assert span.attributes["otelmw.middleware.outcome"] == "rewritten"


def test_tool_dispatcher_on_method(h: TelemetryHarness) -> None:
    class Registry:
        def __init__(self) -> None:
            self.prefix = "reg"

        @tool_dispatcher(pipeline=h.pipeline)
        def dispatch(self, tool_name: str, args: dict[str, Any],
                     tool_call_id: str | None = None) -> Any:
            return f"{self.prefix}:{tool_name}:{sorted(args)}:{tool_call_id}"

    r = Registry()
    assert r.dispatch("t1", {"a": 1}, "c1") == "reg:t1:['a']:c1"
    assert r.dispatch("t2", args={"b": 2}, tool_call_id="c2") == "reg:t2:['b']:c2"
    assert Registry.dispatch(r, "t3", {"c": 3}) == "reg:t3:['c']:None"
    assert [s.name for s in h.spans()] == ["execute_tool t1", "execute_tool t2",
                                           "execute_tool t3"]
    assert h.one("execute_tool t1").attributes["gen_ai.tool.call.id"] == "c1"


def test_tool_dispatcher_custom_parameter_names(h: TelemetryHarness) -> None:
    @tool_dispatcher(name_arg="name", args_arg="params", call_id_arg=None,
                     pipeline=h.pipeline)
    def run(name: str, params: dict[str, Any]) -> Any:
        return params["x"] * 2

    assert run("double", {"x": 4}) == 8
    assert h.one("execute_tool double").attributes["otelmw.result.success"] is True


def test_tool_dispatcher_raising_tool_gives_tool_error(h: TelemetryHarness) -> None:
    @tool_dispatcher(pipeline=h.pipeline)
    def dispatch(tool_name: str, args: dict[str, Any], tool_call_id: str | None = None) -> Any:
        raise ValueError("no such city")

    assert dispatch("weather", {"city": "Atlantis"}) == "Tool Error: no such city"
    span = h.one("execute_tool weather")
    assert is_error(span) and span.attributes["error.type"] == "builtins.ValueError"
    assert span.attributes["otelmw.result.error_message"] == "no such city"


def test_tool_dispatcher_raise_errors_reraises(h: TelemetryHarness) -> None:
    @tool_dispatcher(raise_errors=True, pipeline=h.pipeline)
    def dispatch(tool_name: str, args: dict[str, Any], tool_call_id: str | None = None) -> Any:
        raise LookupError("gone")

    with pytest.raises(LookupError, match="gone"):
        dispatch("weather", {})
    span = h.one("execute_tool weather")
    assert is_error(span) and span.attributes["error.type"] == "builtins.LookupError"


def test_tool_dispatcher_async(h: TelemetryHarness) -> None:
    @tool_dispatcher(pipeline=h.pipeline)
    async def dispatch(tool_name: str, args: dict[str, Any],
                       tool_call_id: str | None = None) -> Any:
        await asyncio.sleep(0)
        if args.get("fail"):
            raise RuntimeError("async boom")
        return args["v"]

    assert asyncio.run(dispatch("t", {"v": 7}, "c")) == 7
    assert asyncio.run(dispatch("t", args={"fail": True})) == "Tool Error: async boom"
    ok, bad = h.named("execute_tool t")
    assert is_unset(ok) and is_error(bad)


def test_tool_dispatcher_missing_params_rejected_at_decoration() -> None:
    def wrong(name: str, payload: dict[str, Any]) -> Any:
        return None

    with pytest.raises(ValueError, match="tool_name"):
        tool_dispatcher(wrong)
    with pytest.raises(ValueError):
        tool_dispatcher(name_arg="name", args_arg="args")(wrong)


# ---------------------------------------------------------------- agent_turn
def test_agent_turn_function_parents_calls(h: TelemetryHarness) -> None:
    @llm_adapter(pipeline=h.pipeline)
    def create(**kw: Any) -> Any:
        return RESPONSE

    @tool_dispatcher(pipeline=h.pipeline)
    def dispatch(tool_name: str, args: dict[str, Any], tool_call_id: str | None = None) -> Any:
        return "ok"

    @agent_turn(name="planner", pipeline=h.pipeline)
    def run_turn(question: str) -> str:
        create(model=MODEL, messages=[{"role": "user", "content": question}])
        return dispatch("search", {"q": question})

    assert run_turn("why?") == "ok"
    agent = h.one("invoke_agent planner")
    assert agent.parent is None
    assert is_child(h.one(f"chat {MODEL}"), agent)
    assert is_child(h.one("execute_tool search"), agent)
    assert agent.attributes["gen_ai.agent.name"] == "planner"


def test_agent_turn_method_uses_instance_name_and_async(h: TelemetryHarness) -> None:
    class Agent:
        def __init__(self, name: str) -> None:
            self.name = name

        @agent_turn(pipeline=h.pipeline)
        def step(self) -> str:
            return self.name

        @agent_turn(pipeline=h.pipeline)
        async def astep(self) -> str:
            await asyncio.sleep(0)
            return self.name

    assert Agent("alice").step() == "alice"
    assert asyncio.run(Agent("bob").astep()) == "bob"
    assert h.one("invoke_agent alice").parent is None
    assert h.one("invoke_agent bob").parent is None


def test_agent_turn_default_name_and_error(h: TelemetryHarness) -> None:
    @agent_turn(pipeline=h.pipeline)
    def my_agent() -> None:
        raise RuntimeError("turn broke")

    with pytest.raises(RuntimeError):
        my_agent()
    span = h.one("invoke_agent my_agent")
    assert is_error(span) and span.attributes["error.type"] == "builtins.RuntimeError"


# ---------------------------------------------------------------- wrap_* / unwrap
MODULE_SOURCE = textwrap.dedent('''
    class Client:
        def create(self, **kwargs):
            return {"id": "wrapped-1", "model": kwargs.get("model"), "kwargs": kwargs}

        async def acreate(self, **kwargs):
            return {"id": "wrapped-2", "model": kwargs.get("model")}


    class Tools:
        def dispatch(self, tool_name, args, tool_call_id=None):
            return f"{tool_name}:{args}"


    def create(**kwargs):
        return {"id": "fn", "model": kwargs.get("model")}
''')


@pytest.fixture
def host_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    name = "otelmw_deco_host_mod"
    (tmp_path / f"{name}.py").write_text(MODULE_SOURCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    module = importlib.import_module(name)
    yield module
    sys.modules.pop(name, None)


def test_wrap_llm_adapter_and_unwrap_restores_original(h: TelemetryHarness,
                                                       host_module: Any) -> None:
    name = host_module.__name__
    original = host_module.Client.__dict__["create"]
    undo = wrap_llm_adapter(name, "Client.create", provider="openai", pipeline=h.pipeline)
    assert host_module.Client.__dict__["create"] is not original
    out = host_module.Client().create(model=MODEL, temperature=0)
    assert out["kwargs"] == {"model": MODEL, "temperature": 0}
    span = assert_chat(h)
    assert span.attributes["gen_ai.response.id"] == "wrapped-1"
    undo()
    assert host_module.Client.__dict__["create"] is original
    h.clear()
    host_module.Client().create(model=MODEL)
    assert h.spans() == []  # unwrapped: no more spans
    unwrap(name, "Client.create")  # no-op when not wrapped
    assert host_module.Client.__dict__["create"] is original


def test_wrap_llm_adapter_async_method_and_module_function(h: TelemetryHarness,
                                                           host_module: Any) -> None:
    name = host_module.__name__
    original_fn = host_module.create
    original_async = host_module.Client.__dict__["acreate"]
    undo_fn = wrap_llm_adapter(name, "create", pipeline=h.pipeline)
    undo_async = wrap_llm_adapter(name, "Client.acreate", pipeline=h.pipeline)
    assert host_module.create(model=MODEL)["id"] == "fn"
    assert asyncio.run(host_module.Client().acreate(model=MODEL))["id"] == "wrapped-2"
    assert [s.attributes["gen_ai.response.id"] for s in h.named(f"chat {MODEL}")] == [
        "fn", "wrapped-2"]
    undo_fn()
    undo_async()
    assert host_module.create is original_fn
    assert host_module.Client.__dict__["acreate"] is original_async


def test_wrap_tool_dispatcher_and_unwrap(h: TelemetryHarness, host_module: Any) -> None:
    name = host_module.__name__
    original = host_module.Tools.__dict__["dispatch"]
    undo = wrap_tool_dispatcher(name, "Tools.dispatch", pipeline=h.pipeline)
    assert host_module.Tools().dispatch("lookup", {"k": 1}, "c9") == "lookup:{'k': 1}"
    assert h.one("execute_tool lookup").attributes["gen_ai.tool.call.id"] == "c9"
    undo()
    assert host_module.Tools.__dict__["dispatch"] is original
