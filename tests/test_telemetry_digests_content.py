"""Content capture policy (never by default; spans / events / both when asked;
truncated and redacted) and raw-result digests recomputed from the documented
canonical serialization.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _support.calls import MODEL, MODES, TOOL
from _support.digest_key import keyed_hex
from _support.telemetry import TelemetryHarness, all_exported_text, assert_cut_to

from otelmw.config.settings import load
from otelmw.telemetry import ContentPolicy, default_redactor, digest, set_redactor
from otelmw.telemetry.content import digests
from otelmw.telemetry.content.digests import canonical_bytes
from otelmw.telemetry.content.policy import (
    EVENT_ONLY,
    NO_CONTENT,
    SPAN_AND_EVENT,
    SPAN_ONLY,
    mime_type,
)

pytestmark = pytest.mark.timeout(60)

CANARY_MSG = "CANARY-msg-5e1f0c"
CANARY_ARGS = "CANARY-args-93b2d7"
CANARY_RESULT = "CANARY-result-c04a18"
CANARY_REPLY = "CANARY-reply-77d1aa"
CANARIES = (CANARY_MSG, CANARY_ARGS, CANARY_RESULT, CANARY_REPLY)

CONTENT_ATTRS = ("gen_ai.input.messages", "gen_ai.tool.call.arguments",
                 "gen_ai.tool.call.result")


def make(mode: str = NO_CONTENT, max_length: int = 4096) -> TelemetryHarness:
    return TelemetryHarness(mode, max_length)


@pytest.fixture
def harnesses() -> Iterator[list[TelemetryHarness]]:
    made: list[TelemetryHarness] = []
    yield made
    for harness in made:
        harness.close()
        harness.assert_clean()


def run_agent(h: TelemetryHarness, mode: str, *, message: str = CANARY_MSG,
              args_value: str = CANARY_ARGS, result_value: str = CANARY_RESULT) -> None:
    """One turn: an LLM call and a tool call carrying the canaries, with middleware
    and hooks registered so every log path fires."""
    p = h.pipeline

    def rewrite(**kw: Any) -> Any:
        return {"request": {**kw["request"], "temperature": 0.1}, "reason": "tune"}

    def wrap(**kw: Any) -> Any:
        return kw["next_call"]()

    p.registry.add_middleware("llm_request", rewrite, plugin="x")
    p.registry.add_middleware("tool_execution", wrap, plugin="x")
    for hook in ("pre_api_request", "post_api_request", "pre_tool_call", "post_tool_call",
                 "transform_tool_result"):
        p.registry.add_hook(hook, lambda **kw: None, plugin="x")
    request = {"model": MODEL, "messages": [{"role": "user", "content": message}]}
    response = {"id": "r1", "model": MODEL, "choices": [
        {"finish_reason": "stop", "message": {"role": "assistant", "content": CANARY_REPLY}}]}
    args = {"query": args_value}

    if mode == "sync":
        with p.turn("agent"):
            p.run_llm(request, lambda r: response)
            p.run_tool(TOOL, args, lambda a: {"answer": result_value})
    else:
        async def main() -> None:
            async with p.turn("agent"):
                await p.arun_llm(request, lambda r: response)
                await p.arun_tool(TOOL, args, lambda a: {"answer": result_value})
        asyncio.run(main())


def span_texts(h: TelemetryHarness) -> str:
    return json.dumps([dict(s.attributes) for s in h.spans()] +
                      [s.status.description for s in h.spans()], ensure_ascii=False)


def log_texts(h: TelemetryHarness) -> str:
    return json.dumps([[r.body, dict(r.attributes)] for r in h.logs()], ensure_ascii=False,
                      default=str)


# ---------------------------------------------------------------- capture policy
@pytest.mark.parametrize("mode", MODES)
def test_no_content_by_default(harnesses: list[TelemetryHarness], mode: str) -> None:
    h = make()
    harnesses.append(h)
    assert h.observer.content == ContentPolicy() and ContentPolicy().mode == NO_CONTENT
    run_agent(h, mode)
    assert len(h.spans()) >= 4 and len(h.logs()) == 5
    for text in all_exported_text(h):
        for canary in CANARIES:
            assert canary not in text, (canary, text)
    for span in h.spans():
        for key in CONTENT_ATTRS:
            assert key not in span.attributes
    assert all(r.body is None for r in h.logs())
    # Digests stand in for content.
    tool_span = h.one(f"execute_tool {TOOL}")
    assert tool_span.attributes["otelmw.result.raw.digest"] == digest(
        {"answer": CANARY_RESULT})[0]


@pytest.mark.parametrize("mode", MODES)
def test_span_only(harnesses: list[TelemetryHarness], mode: str) -> None:
    h = make(SPAN_ONLY)
    harnesses.append(h)
    run_agent(h, mode)
    chat, tool = h.one(f"chat {MODEL}"), h.one(f"execute_tool {TOOL}")
    assert CANARY_MSG in chat.attributes["gen_ai.input.messages"]
    # The conventions' input-messages schema: role + parts.
    assert json.loads(chat.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": CANARY_MSG}]}]
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"query": CANARY_ARGS}
    assert json.loads(tool.attributes["gen_ai.tool.call.result"]) == {"answer": CANARY_RESULT}
    logs = log_texts(h)
    assert len(h.logs()) == 5
    for canary in CANARIES:
        assert canary not in logs
    assert all(r.body is None for r in h.logs())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("changed_by", ["tool_request", "tool_execution"])
def test_the_tool_span_shows_the_arguments_the_tool_got(
        harnesses: list[TelemetryHarness], mode: str, changed_by: str) -> None:
    """``gen_ai.tool.call.arguments`` is the effective arguments: after a
    ``tool_request`` rewrite, or a wrapper passing others on, what the tool received."""
    h = make(SPAN_ONLY)
    harnesses.append(h)
    p = h.pipeline
    if changed_by == "tool_request":
        p.registry.add_middleware(
            "tool_request", lambda **kw: {"args": {**kw["args"], "query": "rewritten"}},
            plugin="x")
    else:
        p.registry.add_middleware(
            "tool_execution", lambda **kw: kw["next_call"]({**kw["args"], "query": "passed"}),
            plugin="x")
    got: list[Any] = []

    def tool(a: Any) -> str:
        got.append(dict(a))
        return "ok"

    if mode == "sync":
        p.run_tool(TOOL, {"query": CANARY_ARGS}, tool)
    else:
        asyncio.run(p.arun_tool(TOOL, {"query": CANARY_ARGS}, tool))
    (received,) = got
    assert received["query"] != CANARY_ARGS  # the test's premise: the tool got others
    span = h.one(f"execute_tool {TOOL}")
    assert json.loads(span.attributes["gen_ai.tool.call.arguments"]) == received


@pytest.mark.parametrize("mode", MODES)
def test_event_only(harnesses: list[TelemetryHarness], mode: str) -> None:
    h = make(EVENT_ONLY)
    harnesses.append(h)
    run_agent(h, mode)
    spans = span_texts(h)
    for canary in CANARIES:
        assert canary not in spans
    bodies = {r.event_name: r.body for r in h.logs()}
    pre = bodies["otelmw.hook.pre_api_request"]
    assert json.loads(pre["request"])["messages"] == [{"role": "user", "content": CANARY_MSG}]
    assert json.loads(bodies["otelmw.hook.pre_tool_call"]["args"]) == {"query": CANARY_ARGS}
    post = bodies["otelmw.hook.post_tool_call"]
    assert json.loads(post["args"]) == {"query": CANARY_ARGS}
    assert json.loads(post["result"]) == {"answer": CANARY_RESULT}
    # Hook records' attributes stay content-free; the body carries what was asked for.
    # The GenAI conventions' inference event carries the messages as its attributes.
    (details,) = h.logs_named("gen_ai.client.inference.operation.details")
    assert CANARY_MSG in json.dumps(dict(details.attributes), default=str)
    for rec in h.logs():
        if rec is details:
            continue
        for canary in CANARIES:
            assert canary not in json.dumps(dict(rec.attributes), default=str)


@pytest.mark.parametrize("mode", MODES)
def test_span_and_event(harnesses: list[TelemetryHarness], mode: str) -> None:
    h = make(SPAN_AND_EVENT)
    harnesses.append(h)
    run_agent(h, mode)
    spans, logs = span_texts(h), log_texts(h)
    for canary in (CANARY_MSG, CANARY_ARGS, CANARY_RESULT):
        assert canary in spans
        assert canary in logs


@pytest.mark.parametrize("policy", [SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT])
def test_truncation_to_max_length(harnesses: list[TelemetryHarness], policy: str) -> None:
    h = make(policy, max_length=64)
    harnesses.append(h)
    long = "x" * 500
    run_agent(h, "sync", message=long + CANARY_MSG, args_value=long + CANARY_ARGS,
              result_value=long + CANARY_RESULT)
    captured: list[str] = []
    for span in h.spans():
        captured += [span.attributes[k] for k in CONTENT_ATTRS if k in span.attributes]
        # A message attribute is cut inside its part contents and stays valid JSON
        # (the conventions' schema; see tests/test_semconv_messages.py).
        for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
            if key in span.attributes:
                value = span.attributes[key]
                assert len(value) <= 64
                (message,) = json.loads(value)
                assert message["parts"][0]["content"].endswith("…")
    for rec in h.logs():
        if rec.body:
            captured += list(rec.body.values())
    captured = [v for v in captured if not v.startswith("[{")]
    assert len(captured) >= 2
    # The tool's arguments and result are structures: JSON still, cut inside strings.
    assert {assert_cut_to(value, 64) for value in captured} == {"json"}
    text = json.dumps(captured, ensure_ascii=False)
    for canary in CANARIES:
        assert canary not in text


class _Model:
    """A pydantic-like value: rendered through its ``model_dump``."""

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        return {"rows": [{"name": f"row {i}", "note": "n" * 40} for i in range(500)]}


CUT_STRUCTURES = {
    "long strings": ({"path": "/data/" + "x" * 900, "n": 3, "tags": ["a" * 300, "ok"]},
                     lambda v: v["n"] == 3 and v["tags"][1] == "ok"
                     and v["path"].startswith("/data/x") and v["path"].endswith("…")),
    "many numbers": (list(range(100_000)), lambda v: v[:3] == [0, 1, 2] and v[-1] == "…"),
    "many keys": ({f"key{i}": i for i in range(5000)},
                  lambda v: v["key0"] == 0 and v["…"] == "…"),
    "deep nesting": (json.loads("[" * 200 + "]" * 200),
                     lambda v: "…" in json.dumps(v, ensure_ascii=False)),
    "model": (_Model(), lambda v: v["rows"][0]["name"] == "row 0"),
    "secret in a cut string": ({"note": "api_key=sk-abcdefghijklmnopqrstu " + "z" * 500},
                               lambda v: "sk-abc" not in json.dumps(v)
                               and v["note"].startswith("api_key=[REDACTED] zz")),
}


@pytest.mark.parametrize("name", CUT_STRUCTURES)
def test_a_structure_cut_to_the_limit_stays_json_of_its_shape(name: str) -> None:
    value, holds = CUT_STRUCTURES[name]
    text = ContentPolicy(SPAN_ONLY, 120).render(value)
    assert len(text) <= 120 and mime_type(text) == "application/json", text
    assert holds(json.loads(text)), text


def test_a_text_cut_to_the_limit_is_marked() -> None:
    text = ContentPolicy(SPAN_ONLY, 50).render("word " * 100)
    assert len(text) == 50 and text.endswith("…[truncated]") and mime_type(text) == "text/plain"


def test_render_short_value_untouched_and_unserializable_never_raises() -> None:
    policy = ContentPolicy(SPAN_ONLY, 64)
    assert policy.render("short") == "short"
    assert policy.render({"b": 1, "a": [1, 2]}) == '{"a": [1, 2], "b": 1}'

    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    d: dict[str, Any] = {}
    d["self"] = d
    assert isinstance(policy.render(d), str)
    assert isinstance(policy.render(Hostile()), str)


SECRET_KEY = "sk-proj-AbCdEf0123456789xyz"
BEARER = "Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig"


@pytest.mark.parametrize("policy", [SPAN_ONLY, EVENT_ONLY])
def test_default_redactor_masks_keys_and_bearer_tokens(
        harnesses: list[TelemetryHarness], policy: str) -> None:
    h = make(policy)
    harnesses.append(h)
    run_agent(h, "sync", message=f"my key is {SECRET_KEY} ok",
              args_value=f"Authorization: {BEARER}", result_value=f"leaked {SECRET_KEY}")
    text = span_texts(h) + log_texts(h)
    assert "[REDACTED]" in text
    assert SECRET_KEY not in text and "sk-proj-AbCdEf" not in text
    assert "eyJhbGciOiJIUzI1NiJ9" not in text
    assert "my key is" in text and "leaked" in text  # the rest of the content survives


def test_default_redactor_function() -> None:
    out = default_redactor(
        f"key={SECRET_KEY}; hdr {BEARER}; anthropic sk-ant-api03-abcdefghijklmnop")
    assert SECRET_KEY not in out and "eyJhbGciOiJIUzI1NiJ9" not in out
    assert "sk-ant-api03-abcdefghijklmnop" not in out
    assert out.count("[REDACTED]") == 3
    assert default_redactor("nothing secret here") == "nothing secret here"
    assert default_redactor('{"api_key": "abcd1234"}') == '{"api_key": "[REDACTED]"}'


def test_set_redactor_custom_and_restore(harnesses: list[TelemetryHarness]) -> None:
    h = make(SPAN_ONLY)
    harnesses.append(h)
    with pytest.raises(TypeError):
        set_redactor("not callable")  # type: ignore[arg-type]
    set_redactor(lambda text: text.replace(CANARY_ARGS, "<masked>"))
    try:
        run_agent(h, "sync")
    finally:
        set_redactor(None)
    tool = h.one(f"execute_tool {TOOL}")
    assert tool.attributes["gen_ai.tool.call.arguments"] == '{"query": "<masked>"}'
    assert ContentPolicy(SPAN_ONLY).render(SECRET_KEY) == "[REDACTED]"


@pytest.mark.parametrize(("raw", "expected"), [
    (None, NO_CONTENT), ("", NO_CONTENT), ("NO_CONTENT", NO_CONTENT), ("false", NO_CONTENT),
    ("SPAN_ONLY", SPAN_ONLY), ("true", SPAN_ONLY), ("span_only", SPAN_ONLY),
    ("EVENT_ONLY", EVENT_ONLY), (" SPAN_AND_EVENT ", SPAN_AND_EVENT),
])
def test_content_policy_from_the_environments_settings(
        monkeypatch: pytest.MonkeyPatch, raw: str | None, expected: str) -> None:
    monkeypatch.delenv("OTELMW_CONTENT_MAX_LENGTH", raising=False)
    if raw is None:
        monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    else:
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raw)
    assert ContentPolicy.from_settings(load()) == ContentPolicy(expected, 4096)


@pytest.mark.parametrize("typo", ["SPAN_ONYL", "span-only", "yes", "EVENTS"])
def test_content_policy_settings_reject_a_typo(monkeypatch: pytest.MonkeyPatch,
                                              typo: str) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", typo)
    with pytest.raises(ValueError, match="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"):
        ContentPolicy.from_settings(load())


def test_content_policy_max_length_from_the_environments_settings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    monkeypatch.setenv("OTELMW_CONTENT_MAX_LENGTH", "100")
    assert ContentPolicy.from_settings(load()) == ContentPolicy(SPAN_ONLY, 100)
    for bad in ("lots", "8"):
        monkeypatch.setenv("OTELMW_CONTENT_MAX_LENGTH", bad)
        with pytest.raises(ValueError, match="OTELMW_CONTENT_MAX_LENGTH"):
            ContentPolicy.from_settings(load())


# ---------------------------------------------------------------- digests
def sha(data: bytes) -> str:
    return "sha256-keyed:" + keyed_hex(data)


def canonical_json(value: Any) -> bytes:
    """The documented canonical serialization of a JSON tree."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8", "surrogatepass")


def test_digest_bytes_like() -> None:
    data = b"\x00\x01binary\xff"
    assert digest(data) == (sha(data), len(data))
    assert digest(bytearray(data)) == (sha(data), len(data))
    assert digest(memoryview(data)) == (sha(data), len(data))
    assert digest(b"") == (sha(b""), 0)
    assert canonical_bytes(data) == data


def test_digest_str_is_utf8() -> None:
    assert digest("héllo wörld") == (sha("héllo wörld".encode()), 13)
    assert digest("") == (sha(b""), 0)
    assert digest("日本") == (sha("日本".encode()), 6)
    # a str is hashed as text, not as a JSON string
    assert digest("plain") != digest(["plain"])


def test_digest_dict_is_canonical_json() -> None:
    value = {"b": [1, 2.5, None, True], "a": {"z": "é", "y": (1, 2)}, "c": "日本"}
    expected = canonical_json(value)
    assert expected == '{"a":{"y":[1,2],"z":"é"},"b":[1,2.5,null,true],"c":"日本"}'.encode()
    assert digest(value) == (sha(expected), len(expected))
    reordered = {"c": "日本", "a": {"y": [1, 2], "z": "é"}, "b": [1, 2.5, None, True]}
    assert digest(reordered) == digest(value)
    assert canonical_bytes(value) == expected


def test_digest_json_scalars_and_lists() -> None:
    for value in (None, True, 0, 42, -1.5, [1, "a"], [], {}):
        data = canonical_json(value)
        assert digest(value) == (sha(data), len(data)), value


def test_digest_tree_with_bytes_exceptions_and_objects() -> None:
    class Custom:
        pass

    value = {"blob": b"\x00\xff", "err": ValueError("bad"), "obj": Custom()}
    expected = canonical_json({
        "blob": "base64:" + base64.b64encode(b"\x00\xff").decode(),
        "err": "builtins.ValueError: bad",
        "obj": f"<{Custom.__module__}.{Custom.__qualname__}>",
    })
    assert digest(value) == (sha(expected), len(expected))


def test_digest_model_dump_objects() -> None:
    class Model:
        def model_dump(self, mode: str = "python") -> dict[str, Any]:
            assert mode == "json"
            return {"id": "m1", "n": 2}

    assert digest(Model())[0] == sha(canonical_json({"id": "m1", "n": 2}))
    assert digest({"inner": Model()})[0] == sha(canonical_json({"inner": {"id": "m1", "n": 2}}))


def test_digest_non_string_keys() -> None:
    assert digest({1: "a", 2: "b"})[0] == sha(b'{"1":"a","2":"b"}')
    # Keys json.dumps cannot sort together are converted, then sorted as strings;
    # such dicts must not all collapse onto one type-tag digest.
    assert digest({1: "a", "b": 2})[0] == sha(b'{"1":"a","b":2}')
    assert digest({1: "a", "b": 3})[0] != digest({1: "a", "b": 2})[0]
    assert digest({(1, 2): "t"})[0] == sha(b'{"(1, 2)":"t"}')
    assert digest({None: 1, "a": 2})[0] == sha(b'{"a":2,"null":1}')


def test_digest_exception() -> None:
    exc = KeyError("missing")
    text = b"builtins.KeyError: 'missing'"
    assert digest(exc) == (sha(text), len(text))
    assert digest(RuntimeError("x")) == (sha(b"builtins.RuntimeError: x"), 24)

    class Hostile(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str")

    name = f"{Hostile.__module__}.{Hostile.__qualname__}: "
    assert digest(Hostile())[0] == sha(name.encode())


def test_an_otelmw_error_as_a_raw_result_names_its_stable_home() -> None:
    """An otelmw error whose class moved keeps the name it is exported under (its
    ``error.type``) in a raw result's type and digest, so those do not change when the
    code is regrouped."""
    from otelmw.core.failures import error_type
    from otelmw.core.pipeline import ToolArgumentsError
    from otelmw.telemetry.content.digests import type_name

    exc = ToolArgumentsError("not JSON")
    assert ToolArgumentsError.__module__ != "otelmw.tool_calls"  # it did move
    assert type_name(exc) == error_type(exc) == "otelmw.tool_calls.ToolArgumentsError"
    text = b"otelmw.tool_calls.ToolArgumentsError: not JSON"
    assert digest(exc) == (sha(text), len(text))
    assert type_name(KeyError()) == "KeyError"


def test_digest_huge_str_is_sampled_by_characters() -> None:
    cap = 4096
    s = "a" * 3000 + "é" * 7000 + "z" * 3000
    d, size = digest(s, max_bytes=cap)
    half = cap // 2
    expected = keyed_hex(
        f"{len(s)}:".encode() + s[:half].encode() + s[-half:].encode())
    assert d == "sha256-keyed-sampled:" + expected
    assert size == len(s)
    # Changing the middle is (by design) invisible; changing an end is not.
    mid = s[:6000] + "Q" + s[6001:]
    assert digest(mid, max_bytes=cap)[0] == d
    assert digest("b" + s[1:], max_bytes=cap)[0] != d


def test_digest_str_over_cap_in_utf8_only_is_sampled_by_characters() -> None:
    cap = 4096
    s = "é" * 3000  # 3000 characters (under the cap) but 6000 UTF-8 bytes (over it)
    half = cap // 2
    expected = keyed_hex(
        f"{len(s)}:".encode() + s[:half].encode() + s[-half:].encode())
    assert digest(s, max_bytes=cap) == ("sha256-keyed-sampled:" + expected, 3000)
    # just under the cap in bytes: the whole thing, not sampled
    t = "é" * 2048
    assert digest(t, max_bytes=cap) == (sha(t.encode()), 4096)


def test_digest_huge_str_default_cap_is_bounded_in_time() -> None:
    s = "x" * (32 * 1024 * 1024)
    t0 = time.perf_counter()
    d, size = digest(s)
    assert time.perf_counter() - t0 < 2.0
    assert d.startswith("sha256-keyed-sampled:") and size == len(s)


def test_digest_huge_bytes_sampled() -> None:
    cap = 2048
    data = bytes(range(256)) * 40
    half = cap // 2
    expected = keyed_hex(f"{len(data)}:".encode() + data[:half] + data[-half:])
    assert digest(data, max_bytes=cap) == ("sha256-keyed-sampled:" + expected, len(data))


def test_digest_huge_tree_is_prefix_hashed() -> None:
    cap = 4096
    tree = {"rows": [{"i": i, "v": "value-" * 5} for i in range(2000)]}
    full = canonical_json(tree)
    assert len(full) > cap
    assert digest(tree, max_bytes=cap) == (
        "sha256-keyed-prefix:" + keyed_hex(full[:cap]), -1)
    small = {"rows": [1, 2, 3]}
    assert digest(small, max_bytes=cap) == (sha(canonical_json(small)),
                                            len(canonical_json(small)))


def test_digest_cyclic_structures_never_raise() -> None:
    d: dict[str, Any] = {"a": 1}
    d["self"] = d
    assert digest(d) == (sha(b"dict"), 4)
    lst: list[Any] = [1]
    lst.append(lst)
    assert digest(lst) == (sha(b"list"), 4)
    big: dict[str, Any] = {f"k{i}": "v" * 100 for i in range(100)}
    big["loop"] = [big]
    assert digest(big, max_bytes=1024)[0].startswith("sha256-keyed")
    mixed: dict[Any, Any] = {1: "a", "b": None}
    mixed["b"] = mixed  # cycle in a dict whose keys need converting
    assert digest(mixed) == (sha(b"dict"), 4)


def test_digest_hostile_objects_never_raise() -> None:
    class BadDump:
        def model_dump(self, mode: str = "python") -> Any:
            raise RuntimeError("no dump")

    tag = f"{BadDump.__module__}.{BadDump.__qualname__}"
    assert digest(BadDump()) == (sha(tag.encode()), len(tag))
    assert digest([BadDump()])[0] == sha(canonical_json([f"<{tag}>"]))
    assert digest(object()) == (sha(b"object"), 6)
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert digest(deep)[0].startswith("sha256-keyed")


def test_digest_lone_surrogates() -> None:
    s = "a\ud800b"  # not encodable as strict UTF-8
    data = s.encode("utf-8", "surrogatepass")
    assert data == b"a\xed\xa0\x80b"
    assert digest(s) == (sha(data), 5)
    tree = {"k": "\udcff"}
    expected = '{"k":"\udcff"}'.encode("utf-8", "surrogatepass")
    assert digest(tree) == (sha(expected), len(expected))
    assert canonical_bytes(tree) == expected


def test_digest_bound_sees_through_dict_and_list_subclasses() -> None:
    """The size walk that bounds tree digests walks subclasses too: a big
    OrderedDict (or list subclass) deep in a result is prefix-hashed, not encoded
    whole."""
    import collections

    class Rows(list):  # type: ignore[type-arg]
        pass

    cap = 4096
    rows = collections.OrderedDict((f"k{i}", "value-" * 8) for i in range(500))
    for tree in ({"data": rows}, {"data": Rows(["value-" * 8] * 500)}):
        full = canonical_json(tree)
        assert len(full) > cap
        assert digest(tree, max_bytes=cap) == (
            "sha256-keyed-prefix:" + keyed_hex(full[:cap]), -1)
        # the digest alone cannot tell "walked and cut" from "encoded whole, then
        # cut": the walk itself must see the subclass' size
        assert digests._fits(tree, cap) == digests._TOO_BIG


def test_digest_tree_with_non_string_keys_is_bounded_and_stable() -> None:
    cap = 4096
    tree = {1: "a" * 3000, "b": "c" * 3000}  # non-str keys: the walk counts the rest
    # unsortable keys (int and str): converted first ("1"), then sorted as strings
    full = canonical_json({"1": "a" * 3000, "b": "c" * 3000})
    expected = ("sha256-keyed-prefix:" + keyed_hex(full[:cap]), -1)
    assert digest(tree, max_bytes=cap) == expected
    assert digest(dict(reversed(list(tree.items()))), max_bytes=cap) == expected
    # the walk itself must find it over the cap (not leave it to a whole encode)
    assert digests._fits(tree, cap) == digests._TOO_BIG


def test_a_structure_the_redactor_leaves_no_json_of_is_cut_as_text() -> None:
    set_redactor(lambda s: s.replace('"', "'"))  # a redactor whose output is not JSON
    try:
        text = ContentPolicy(SPAN_ONLY, 80).render({"note": "x" * 500, "n": 1})
    finally:
        set_redactor(None)
    assert len(text) == 80 and text.endswith("…[truncated]") and mime_type(text) == "text/plain"
