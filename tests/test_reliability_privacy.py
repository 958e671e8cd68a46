"""Privacy: prompt, system-instruction, tool-argument and tool-result content never
leaves the process by default; under content capture, secrets are redacted and
content is truncated before export.

Each scenario runs in a fresh interpreter: ``configure()`` with the OTLP exporter (to
``OtlpReceiver``) or the embedded store (``.jsonl`` files), the plain pipeline plus the
real OpenAI and Anthropic SDKs (sync, async, streaming, Responses API) instrumented by
otelmw against ``ScriptedLLMServer``. The search is over the raw bytes of every export
request (spans, logs, metrics, resource, scope, bodies), or of every store file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.components import require_modules
from _support.otlp_receiver import OtlpReceiver
from _support.scripted_llm import ScriptedLLMServer
from _support.telemetry import cut_kind

require_modules("openai", "anthropic")
pytestmark = pytest.mark.host("openai", "anthropic")

CANARY = f"CANARY{uuid.uuid4().hex[:12]}"
API_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8" * 3  # looks like an OpenAI key
ANT_KEY = "sk-ant-api03-" + "Z9y8X7w6V5u4" * 3
BEARER = "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.s3cr3tS1gnatur3"
MAX_LENGTH = 160

AGENT = textwrap.dedent(r"""
    import asyncio, json, os, sys
    import anthropic, openai
    from otelmw import get_pipeline
    from otelmw.instrumentation.anthropic import AnthropicInstrumentor
    from otelmw.instrumentation.openai import OpenAIInstrumentor
    from otelmw.telemetry.setup.configuration import configure

    C = os.environ["T_CANARY"]  # what we place in content (plus, under capture, secrets)
    SECRET = os.environ["T_SECRET"]
    BASE, ROOT = os.environ["T_BASE_URL"], os.environ["T_ROOT_URL"]
    tel = configure("privacy-agent")
    pipe = get_pipeline()

    def audit(**kw):
        return None

    def wrap(**kw):
        return kw["next_call"]()

    def rewrite(**kw):
        return {"request": dict(kw["request"]), "reason": "pin"}

    for kind, cb in (("llm_request", rewrite), ("llm_execution", wrap),
                     ("tool_execution", wrap)):
        pipe.registry.add_middleware(kind, cb, "priv")
    for hook in ("pre_api_request", "post_api_request", "pre_tool_call", "post_tool_call",
                 "transform_tool_result"):
        pipe.registry.add_hook(hook, audit, "priv")
    OpenAIInstrumentor().instrument()
    AnthropicInstrumentor().instrument()

    def text(label):
        return f"{label} {C} {SECRET} " + "padding " * 40

    def tool(args):
        return {"result": text("tool-result"), "args_seen": args}

    oc = openai.OpenAI(base_url=BASE, api_key=os.environ["T_API_KEY"], max_retries=0)
    ac = anthropic.Anthropic(base_url=ROOT, api_key=os.environ["T_ANT_KEY"], max_retries=0)
    tools = [{"type": "function", "function": {
        "name": "lookup", "description": text("tool-description"),
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]
    with pipe.turn("privacy-agent", session_id="sess-1"):
        msgs = [{"role": "system", "content": text("system")},
                {"role": "user", "content": text("prompt")}]
        r = oc.chat.completions.create(model="gpt-priv", messages=msgs, tools=tools)
        call = r.choices[0].message.tool_calls[0]
        out = pipe.run_tool(call.function.name, call.function.arguments, tool,
                            tool_call_id=call.id)
        msgs += [r.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": json.dumps(out)}]
        r2 = oc.chat.completions.create(model="gpt-priv", messages=msgs)
        assert C in r2.choices[0].message.content  # the model saw the tool result
        chunks = list(oc.chat.completions.create(model="gpt-priv", messages=msgs, stream=True,
                                                 stream_options={"include_usage": True}))
        assert chunks
        if hasattr(oc, "responses"):  # none before openai 1.66 (the floor env has 1.26)
            oc.responses.create(model="gpt-priv", instructions=text("instructions"),
                                input=text("responses-input"))

        async def async_calls():
            aoc = openai.AsyncOpenAI(base_url=BASE, api_key=os.environ["T_API_KEY"],
                                     max_retries=0)
            await aoc.chat.completions.create(model="gpt-priv", messages=msgs)
            await pipe.arun_tool("lookup", {"q": text("async-args")}, tool)
        asyncio.run(async_calls())
        ac.messages.create(model="claude-priv", max_tokens=64, system=text("anthropic-system"),
                           messages=[{"role": "user", "content": text("anthropic-prompt")}])
        list(ac.messages.create(model="claude-priv", max_tokens=64, stream=True,
                                system=text("anthropic-system"),
                                messages=[{"role": "user", "content": text("a-stream")}]))
        # the plain pipeline, no SDK
        pipe.run_llm({"model": "plain", "messages": msgs, "tools": tools},
                     lambda req: {"id": "x", "model": "plain", "choices": [
                         {"finish_reason": "stop", "message": {"content": text("answer")}}]},
                     provider="plain")
        pipe.run_tool("lookup", json.dumps({"q": text("json-args")}), tool, tool_call_id="t2")
        pipe.run_tool("lookup", {"q": text("blocked-args")}, lambda a: text("plain-result"))
    print(json.dumps({"shutdown_ok": tel.shutdown(timeout_s=20)}), flush=True)
""")


def _env(tmp_path: Path, server: ScriptedLLMServer, secret: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELMW_"))}
    env.update(OTELMW_HOME=str(tmp_path / "home"), OTELMW_DATA_DIR=str(tmp_path / "store"),
               T_CANARY=CANARY, T_SECRET=secret, T_BASE_URL=server.base_url,
               T_ROOT_URL=server.root_url, T_API_KEY=API_KEY, T_ANT_KEY=ANT_KEY,
               OTEL_METRIC_EXPORT_INTERVAL="60000", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as srv:
        srv.push_tool_calls([("lookup", {"q": f"model-args {CANARY} {BEARER}"})])
        yield srv


def _run(env: dict[str, str], cwd: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", AGENT], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["shutdown_ok"] is True


def _otlp_blobs(rx: OtlpReceiver) -> bytes:
    """Every export request as received: protobuf bytes (spans, logs, metrics, resource,
    scope, bodies). Strings are UTF-8 in protobuf, so a substring search is exact."""
    return b"\n".join(r.message.SerializeToString() for r in rx.raw_requests())


def _store_blobs(store: Path) -> bytes:
    files = sorted(store.glob("*.jsonl"))
    assert {f.name.split("-")[0] for f in files} >= {"traces", "logs", "metrics"}, files
    # the store is OTLP-JSON written with ensure_ascii: decode escapes before searching
    text = "\n".join(f.read_text(encoding="utf-8") for f in files)
    return json.dumps([json.loads(line) for line in text.splitlines() if line.strip()],
                      ensure_ascii=False).encode("utf-8", "surrogatepass")


def _all_strings(rx: OtlpReceiver) -> list[str]:
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for k, x in v.items():
                out.append(str(k))
                walk(x)
        elif isinstance(v, list | tuple):
            for x in v:
                walk(x)

    for s in rx.spans():
        walk([s.name, s.status_message, s.attributes, s.resource, s.scope_name,
              [(e.name, e.attributes) for e in s.events]])
    for log in rx.logs():
        walk([log.event_name, log.body, log.attributes, log.resource])
    for m in rx.metrics():
        walk([m.name, m.description, m.resource, [dp.attributes for dp in m.data_points]])
    return out


def _exercised(rx: OtlpReceiver) -> None:
    names = {s.name for s in rx.spans()}
    assert {"chat gpt-priv", "chat claude-priv", "chat plain", "execute_tool lookup",
            "invoke_agent privacy-agent"} <= names, names
    assert rx.logs(), "hook events exported"
    assert rx.metrics("gen_ai.client.operation.duration")


@pytest.mark.parametrize("sink", ["otlp", "store"])
def test_no_content_leaves_the_process_by_default(tmp_path: Path, server: ScriptedLLMServer,
                                                  sink: str) -> None:
    secret = f"{API_KEY} {BEARER}"
    if sink == "otlp":
        with OtlpReceiver() as rx:
            _run(_env(tmp_path, server, secret, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint),
                 tmp_path)
            rx.wait_for_metric("gen_ai.client.operation.duration", timeout=10)
            blob = _otlp_blobs(rx)
            _exercised(rx)
            strings = _all_strings(rx)
        assert not [x for x in strings if CANARY in x]
    else:
        _run(_env(tmp_path, server, secret), tmp_path)
        blob = _store_blobs(tmp_path / "store")
        assert b"chat gpt-priv" in blob and b"execute_tool lookup" in blob
    # the content really went through the pipeline and the SDKs...
    assert any(CANARY in json.dumps(r.body) for r in server.requests)
    # ...and none of it, nor the API keys or the bearer token, was exported
    for needle in (CANARY, API_KEY, ANT_KEY, BEARER.split()[1], "padding padding"):
        assert needle.encode() not in blob, needle


@pytest.mark.parametrize("sink", ["otlp", "store"])
def test_capture_redacts_secrets_and_truncates(tmp_path: Path, server: ScriptedLLMServer,
                                               sink: str) -> None:
    secret = f"key={API_KEY} auth: {BEARER} anthropic {ANT_KEY}"
    extra = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT",
             "OTELMW_CONTENT_MAX_LENGTH": str(MAX_LENGTH)}
    if sink == "otlp":
        with OtlpReceiver() as rx:
            _run(_env(tmp_path, server, secret, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                      **extra), tmp_path)
            rx.wait_for_metric("gen_ai.client.operation.duration", timeout=10)
            blob = _otlp_blobs(rx)
            _exercised(rx)
            content = [v for s in rx.spans() for k, v in s.attributes.items()
                       if k in ("gen_ai.input.messages", "gen_ai.tool.call.arguments",
                                "gen_ai.tool.call.result")]
            bodies = [v for log in rx.logs() if isinstance(log.body, dict)
                      for v in log.body.values()]
        assert content and bodies
        for value in content + bodies:  # within the limit; a structure, cut or not, JSON
            assert isinstance(value, str) and len(value) <= MAX_LENGTH, (len(value), value)
        cut = [v for v in content + bodies if cut_kind(v)]
        assert cut, "content longer than the limit is cut"
    else:
        _run(_env(tmp_path, server, secret, **extra), tmp_path)
        blob = _store_blobs(tmp_path / "store")
    # capture is on: the (non-secret) canary content is exported...
    assert CANARY.encode() in blob
    assert b"[REDACTED]" in blob
    # ...but API keys and bearer tokens are masked before export
    for needle in (API_KEY, ANT_KEY, BEARER.split()[1], API_KEY[:20], ANT_KEY[:20]):
        assert needle.encode() not in blob, needle
    assert not re.search(rb"sk-(proj|ant)-[A-Za-z0-9]{12}", blob)


ERROR_AGENT = textwrap.dedent(r"""
    import asyncio, json, os
    import anthropic, openai
    from otelmw import get_pipeline
    from otelmw.instrumentation.anthropic import AnthropicInstrumentor
    from otelmw.instrumentation.openai import OpenAIInstrumentor
    from otelmw.telemetry.setup.configuration import configure

    C = os.environ["T_CANARY"]
    BASE, ROOT = os.environ["T_BASE_URL"], os.environ["T_ROOT_URL"]
    tel = configure("privacy-errors")
    pipe = get_pipeline()
    pipe.registry.add_middleware("llm_execution", lambda **kw: kw["next_call"](), "priv")
    pipe.registry.add_hook("api_request_error", lambda **kw: None, "priv")  # log records
    OpenAIInstrumentor().instrument()
    AnthropicInstrumentor().instrument()
    oc = openai.OpenAI(base_url=BASE, api_key="dummy", max_retries=0)
    ac = anthropic.Anthropic(base_url=ROOT, api_key="dummy", max_retries=0)
    msgs = [{"role": "user", "content": f"my prompt {C}"}]
    caught = []

    async def async_call():
        aoc = openai.AsyncOpenAI(base_url=BASE, api_key="dummy", max_retries=0)
        await aoc.chat.completions.create(model="gpt-err", messages=msgs)

    calls = [lambda: oc.chat.completions.create(model="gpt-err", messages=msgs),
             lambda: asyncio.run(async_call()),
             lambda: list(oc.chat.completions.create(model="gpt-err", messages=msgs,
                                                     stream=True)),
             lambda: ac.messages.create(model="claude-err", max_tokens=16, messages=msgs),
             lambda: list(ac.messages.create(model="claude-err", max_tokens=16, messages=msgs,
                                             stream=True))]
    for call in calls:
        try:
            with pipe.turn("privacy-errors"):
                call()
        except (openai.BadRequestError, anthropic.BadRequestError) as exc:
            caught.append(C in str(exc))  # the SDK's own message does echo the prompt
    print(json.dumps({"caught": caught, "shutdown_ok": tel.shutdown(timeout_s=20)}), flush=True)
""")


@pytest.mark.parametrize("sink", ["otlp", "store"])
def test_provider_error_bodies_echoing_the_prompt_are_not_exported_by_default(
        tmp_path: Path, sink: str) -> None:
    """An HTTP 400 ``Invalid content: <the user's text>`` from the provider, through the
    real openai (sync, async, stream) and anthropic (sync, stream) SDKs: the chat spans
    (and the layer and turn spans the error crosses) say the error's type and code."""
    with ScriptedLLMServer() as server:
        for _ in range(5):
            server.push_error(400, f"Invalid content: my prompt {CANARY}")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELMW_"))}
        env.update(OTELMW_HOME=str(tmp_path / "home"), OTELMW_DATA_DIR=str(tmp_path / "store"),
                   T_CANARY=CANARY, T_BASE_URL=server.base_url, T_ROOT_URL=server.root_url,
                   OTEL_METRIC_EXPORT_INTERVAL="60000", PYTHONUNBUFFERED="1")
        with OtlpReceiver() as rx:
            if sink == "otlp":
                env["OTEL_EXPORTER_OTLP_ENDPOINT"] = rx.grpc_endpoint
            proc = subprocess.run([sys.executable, "-c", ERROR_AGENT], env=env, cwd=tmp_path,
                                  capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, proc.stderr[-4000:]
            out = json.loads(proc.stdout.strip().splitlines()[-1])
            assert out == {"caught": [True] * 5, "shutdown_ok": True}
            assert [r.status for r in server.requests] == [400] * 5
            if sink == "otlp":
                rx.wait_for(lambda: len(rx.spans()) >= 15)
                blob = _otlp_blobs(rx)
                statuses = {(s.name, s.status_message) for s in rx.spans()}
            else:
                blob = _store_blobs(tmp_path / "store")
                statuses = {(s["name"], s.get("status", {}).get("message"))
                            for s in _store_spans(blob)}
    assert CANARY.encode() not in blob
    assert b"Invalid content" not in blob
    described = {"chat gpt-err": "BadRequestError: HTTP 400, invalid_request_error",
                 "chat claude-err": "BadRequestError: HTTP 400, invalid_request_error"}
    for name, message in described.items():
        assert (name, message) in statuses, sorted(statuses)
    assert ("invoke_agent privacy-errors",
            "BadRequestError: HTTP 400, invalid_request_error") in statuses


def _store_spans(blob: bytes) -> list[dict[str, Any]]:
    spans = []
    for request in json.loads(blob):
        for rs in request.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                spans.extend(ss.get("spans", []))
    return spans
