"""An unmodified pydantic-ai program under ``opentelemetry-instrument``, fully offline.

The OpenTelemetry distro's zero-code path: ``opentelemetry-instrument python
plain_agent.py`` (a ``run_sync`` turn and a ``run_stream`` turn, each calling
``get_weather`` then answering); the program never imports otelmw, which takes part
only through its entry points (the ``otelmw`` configurator, ``otelmw_pydantic_ai``, the
``otelmw_openai`` layer below it). pydantic-ai talks through the real openai SDK to a
``ScriptedLLMServer``; the stock OTLP exporter sends to an ``OtlpReceiver``.
``otelmw run`` on the same program: ``test_host_pydantic_ai.py``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _support.components import clean_env
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan
from _support.scripted_llm import ScriptedLLMServer

pytestmark = pytest.mark.host("pydantic-ai", "openai")

PROGRAM = Path(__file__).resolve().parent / "pydantic_ai_scripts" / "plain_agent.py"
TIMEOUT = 150
INTERNAL, CLIENT, STATUS_ERROR = 1, 3, 2
AGENT_SPAN, CHAT_SPAN, TOOL_SPAN = ("invoke_agent Weather", "chat scripted-model",
                                    "execute_tool get_weather")


def opentelemetry_instrument() -> str:
    """The launcher beside the interpreter running the tests, else the one on PATH."""
    beside = Path(sys.executable).with_name("opentelemetry-instrument")
    launcher = str(beside) if beside.exists() else shutil.which("opentelemetry-instrument")
    assert launcher, "opentelemetry-instrument comes with opentelemetry-instrumentation"
    return launcher


def test_an_unmodified_program_is_one_trace_per_run(tmp_path: Path) -> None:
    assert not re.search(r"^\s*(import|from)\s+otelmw", PROGRAM.read_text(), re.MULTILINE)
    with ScriptedLLMServer(tool_first=True,
                           tool_args={"get_weather": {"city": "Paris"}}) as srv, \
            OtlpReceiver() as rx:
        env = {k: v for k, v in clean_env(tmp_path).items() if not k.startswith("OPENAI_")}
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                   OTEL_SERVICE_NAME="zero-code-pydantic-ai",
                   OTEL_METRIC_EXPORT_INTERVAL="600000",  # one export, at exit
                   OTEL_BSP_SCHEDULE_DELAY="100", OTEL_BLRP_SCHEDULE_DELAY="100",
                   OPENAI_BASE_URL=srv.base_url, OPENAI_API_KEY="dummy",
                   OPENAI_MAX_RETRIES="0")
        proc = subprocess.run([opentelemetry_instrument(), sys.executable, str(PROGRAM)],
                              env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert "SYNC done: " in proc.stdout and "STREAM done: " in proc.stdout
        durations = rx.wait_for_metric("gen_ai.client.operation.duration")
        spans = rx.spans()
        posts = [r for r in srv.requests if r.api == "chat"]
    assert len(posts) == 4  # two runs, two model requests each
    by_trace: dict[str, list[ReceivedSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_ns):
        by_trace.setdefault(span.trace_id, []).append(span)
    runs = list(by_trace.values())
    assert len(runs) == 2, [[s.name for s in t] for t in runs]
    for run, run_posts in zip(runs, (posts[:2], posts[2:]), strict=True):
        roots = [s for s in run if s.parent_span_id is None]
        assert [r.name for r in roots] == [AGENT_SPAN], [(s.name, s.parent_span_id)
                                                          for s in run]
        root = roots[0]
        assert root.kind == INTERNAL and root.attributes["otelmw.runtime.id"] == "pydantic-ai"
        assert root.resource["service.name"] == "zero-code-pydantic-ai"
        children = [s for s in run if s.parent_span_id == root.span_id]
        # one chat span per provider request (the openai SDK layer only enriched it)
        assert [s.name for s in children] == [CHAT_SPAN, TOOL_SPAN, CHAT_SPAN]
        assert len([s for s in run if s.name.startswith("chat ")]) == 2
        chats = [s for s in children if s.name == CHAT_SPAN]
        for chat, post in zip(chats, run_posts, strict=True):
            assert chat.kind == CLIENT and chat.status_code != STATUS_ERROR
            assert chat.attributes["gen_ai.response.id"] == post.response_id
            assert chat.attributes["gen_ai.provider.name"] == "openai"
        (tool,) = [s for s in children if s.name == TOOL_SPAN]
        sent_ids = [c["id"] for m in run_posts[1].body["messages"]
                    if m.get("role") == "assistant" for c in m.get("tool_calls") or ()]
        assert [tool.attributes["gen_ai.tool.call.id"]] == sent_ids
        assert tool.attributes["otelmw.result.status"] == "ok"
        assert tool.attributes["otelmw.runtime.id"] == "pydantic-ai"
    points = [p for m in durations for p in m.data_points
              if p.attributes["gen_ai.operation.name"] == "chat"]
    assert sum(p.value["count"] for p in points) == 4
