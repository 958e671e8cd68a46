"""Agent turns that span two processes, for tests/test_stack_scaleout.py.

    python scaleout_agent.py turns SECONDS ERROR_EVERY WORKER_ENDPOINT PAUSE_S
    python scaleout_agent.py worker

``turns``: agent turns (``pipeline.turn``) for SECONDS, PAUSE_S apart, each with one
LLM call (a scripted, in-process provider) and one tool call that runs in a WORKER
process: the turn hands the worker its W3C ``traceparent`` on a pipe, the worker runs
the tool under that context (its ``execute_tool`` span is a child of the turn's span,
in the same trace), and answers. Every ERROR_EVERY-th turn's tool fails (an ERROR
span, exported by the worker), so a trace's error and its root are exported by
different processes, to different collectors (this process:
``OTEL_EXPORTER_OTLP_ENDPOINT``; the worker: WORKER_ENDPOINT); the turn itself ends
OK. Prints one line per turn:
``TURN <trace_id> <error 0|1> <start_unix_s>``.
``worker``: reads ``<traceparent> <fail 0|1>`` lines, answers ``ok`` per line.
Both use ``configure()`` with the environment's OTLP settings.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from otelmw import NormalizerRegistry, Pipeline
from otelmw.telemetry.setup.configuration import configure

PROPAGATOR = TraceContextTextMapPropagator()


class ToolFailed(RuntimeError):
    """What a failing turn's tool raises."""


def lookup(args: dict[str, Any]) -> str:
    if args["fail"]:
        raise ToolFailed(f"lookup {args['n']} failed")
    return f"found {args['n']}"


def worker() -> int:
    pipe = Pipeline(normalizers=NormalizerRegistry())
    tel = configure("scaleout-worker", pipeline=pipe)
    for line in sys.stdin:
        traceparent, fail = line.split()
        token = otel_context.attach(PROPAGATOR.extract({"traceparent": traceparent}))
        try:
            pipe.run_tool("lookup", {"n": traceparent[36:52], "fail": fail == "1"}, lookup,
                          tool_call_id=f"call-{traceparent[36:52]}")
        except ToolFailed:
            pass
        finally:
            otel_context.detach(token)
        print("ok", flush=True)
    tel.shutdown()
    return 0


def turns(seconds: float, error_every: int, worker_endpoint: str, pause_s: float) -> int:
    pipe = Pipeline(normalizers=NormalizerRegistry())
    tel = configure("scaleout-agent", pipeline=pipe)
    env = dict(os.environ, OTEL_EXPORTER_OTLP_ENDPOINT=worker_endpoint)
    child = subprocess.Popen([sys.executable, __file__, "worker"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdin is not None and child.stdout is not None

    def model(request: Any) -> Any:
        return {"choices": [{"message": {"role": "assistant", "content": "calling lookup"}}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 3}}

    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        fail = error_every > 0 and i % error_every == 0
        started = time.time()
        with pipe.turn("scaleout", session_id=f"s{os.getpid()}", runtime_id="scaleout"):
            pipe.run_llm({"model": "scripted-1", "messages": [
                {"role": "user", "content": f"question {i}"}]}, model,
                provider="scripted", api_mode="chat_completions")
            carrier: dict[str, str] = {}
            PROPAGATOR.inject(carrier)
            child.stdin.write(f"{carrier['traceparent']} {int(fail)}\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "ok"
            trace_id = format(trace.get_current_span().get_span_context().trace_id, "032x")
        print(f"TURN {trace_id} {int(fail)} {started:.3f}", flush=True)
        i += 1
        time.sleep(pause_s)
    child.stdin.close()
    child.wait(timeout=120)
    tel.shutdown()
    return child.returncode


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        sys.exit(worker())
    sys.exit(turns(float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])))
