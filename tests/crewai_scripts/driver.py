"""One CrewAI scenario for ``tests/test_host_crewai.py``, in a fresh process.

``argv[1]`` is a JSON spec; the last stdout line is ``RESULT <json>``: each run's
output, what each tool received, what the user's own CrewAI hooks and event listener
saw, otelmw's failure counts; every connection attempt beyond 127.0.0.1 is refused and
reported on stderr (``NETWORK-ATTEMPT …``) when it happens. A real CrewAI
crew (two agents, two tasks: a forecaster with tools, then a writer) or a lone agent
talks through CrewAI's native OpenAI provider (the real openai SDK) to the scripted LLM
server at ``OPENAI_BASE_URL``; telemetry goes through ``otelmw.telemetry.configure()``
to ``OTEL_EXPORTER_OTLP_ENDPOINT``. With ``"otelmw": false`` nothing of otelmw is set
up (the same run without otelmw).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the suite's _support
from _support.driver import instrumented, print_result

SPEC: dict[str, Any] = json.loads(sys.argv[1])
TOOL_CALLS: list[dict[str, Any]] = []  # what each tool received
SEEN: list[Any] = []  # what the user's own CrewAI hooks saw, in order
EVENTS: list[str] = []  # CrewAI's own events the user's listener got
WRAPPED: list[str] = []  # otelmw tool_execution wrapper runs
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# Printed to stderr at each connection attempt beyond this machine's loopback, when it
# happens (an exporter of CrewAI's may try at exit, after the RESULT line).
NETWORK_PREFIX = "NETWORK-ATTEMPT "


def _refused(what: str) -> None:
    print(NETWORK_PREFIX + what, file=sys.stderr, flush=True)


def guard_network() -> None:
    """Refuse (and report) every connection or name lookup beyond the loopback: CrewAI's
    own telemetry must stay off here."""
    connect, lookup = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(self: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and address[0] not in LOOPBACK:
            _refused(f"connect {address[0]}")
            raise OSError("network disabled in this test")
        return connect(self, address)

    def guarded_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in LOOPBACK and host is not None:
            _refused(f"lookup {host}")
            raise socket.gaierror("network disabled in this test")
        return lookup(host, *args, **kwargs)

    socket.socket.connect = guarded_connect  # type: ignore[method-assign]
    socket.getaddrinfo = guarded_lookup  # type: ignore[assignment]


def otelmw_plugin(ctx: Any) -> None:
    """An otelmw plugin (otelmw's own API): must apply inside CrewAI's runs."""
    plugin = SPEC.get("plugin") or {}

    def rewrite_request(**kw: Any) -> Any:
        req = kw["request"]
        messages = [dict(m) for m in req["messages"]]
        for m in messages:
            if m["role"] == "user" and isinstance(m["content"], str):
                m["content"] = m["content"] + " [via otelmw]"
        return {"request": {**req, "max_tokens": 77, "messages": messages},
                "reason": "token budget"}

    def rewrite_args(**kw: Any) -> Any:
        return {"args": {**kw["args"], "city": "Oslo"}, "reason": "city policy"}

    def wrap_tool(**kw: Any) -> Any:
        WRAPPED.append(kw["tool_name"])
        return kw["next_call"](kw["args"])

    def block(**kw: Any) -> Any:
        if kw["tool_name"] == plugin.get("block"):
            return {"action": "block", "message": "blocked by policy"}
        return None

    def transform(**kw: Any) -> Any:
        return f"transformed: {kw['result']}"

    if plugin.get("llm_request"):
        ctx.register_middleware("llm_request", rewrite_request)
    if plugin.get("tool_request"):
        ctx.register_middleware("tool_request", rewrite_args)
    if plugin.get("tool_execution"):
        ctx.register_middleware("tool_execution", wrap_tool)
    if plugin.get("block"):
        ctx.register_hook("pre_tool_call", block)
    if plugin.get("transform"):
        ctx.register_hook("transform_tool_result", transform)


def user_hooks() -> None:
    """The user's own CrewAI hooks: note what they see, add a note to the system
    message of every model request (in place, CrewAI's rule), add ``units`` to the tool's input (in
    place), block ``broken``, and mark the tool's result."""
    from crewai.hooks import after_llm_call, after_tool_call, before_llm_call, before_tool_call

    @before_llm_call
    def note_request(ctx: Any) -> None:
        SEEN.append({"hook": "before_llm_call", "messages": len(ctx.messages)})
        system = ctx.messages[0]
        if system.get("role") == "system" and isinstance(system.get("content"), str):
            system["content"] += " (hook: be brief)"

    @after_llm_call
    def note_answer(ctx: Any) -> Any:
        SEEN.append({"hook": "after_llm_call", "response": str(ctx.response)[:40]})
        return None

    @before_tool_call
    def add_units(ctx: Any) -> Any:
        SEEN.append({"hook": "before_tool_call", "tool": ctx.tool_name,
                     "input": dict(ctx.tool_input)})
        if ctx.tool_name == "broken":
            return False
        ctx.tool_input["units"] = "kelvin"
        return None

    @after_tool_call
    def mark_result(ctx: Any) -> Any:
        SEEN.append({"hook": "after_tool_call", "tool": ctx.tool_name,
                     "result": str(ctx.tool_result)})
        return f"{ctx.tool_result} (checked)"


def user_listener() -> None:
    """The user's own listener on CrewAI's event bus."""
    from crewai.events import BaseEventListener
    from crewai.events.types.llm_events import LLMCallCompletedEvent
    from crewai.events.types.tool_usage_events import ToolUsageFinishedEvent

    class Listener(BaseEventListener):
        def setup_listeners(self, bus: Any) -> None:
            @bus.on(LLMCallCompletedEvent)
            def on_llm(source: Any, event: Any) -> None:
                EVENTS.append("llm_call_completed")

            @bus.on(ToolUsageFinishedEvent)
            def on_tool(source: Any, event: Any) -> None:
                EVENTS.append(f"tool_usage_finished {event.tool_name}: {event.output}")

    global _LISTENER
    _LISTENER = Listener()


_LISTENER: Any = None


def make_tools() -> list[Any]:
    from crewai.tools import tool
    from crewai.tools.tool_failure import ToolFailure, ToolFailureReason

    @tool("get_weather")
    def get_weather(city: str, units: str = "imperial") -> str:
        """Current weather for a city."""
        TOOL_CALLS.append({"tool": "get_weather", "city": city, "units": units})
        return f"sunny in {city} ({units})"

    @tool("broken")
    def broken(city: str) -> str:
        """A tool that always raises."""
        TOOL_CALLS.append({"tool": "broken", "city": city})
        raise ValueError("tool exploded")

    @tool("closed")
    def closed(city: str) -> Any:
        """A tool that declares a failure."""
        TOOL_CALLS.append({"tool": "closed", "city": city})
        return ToolFailure(message=f"{city} station closed",
                           reason=ToolFailureReason.EXCEPTION)

    tools = {"get_weather": get_weather, "broken": broken, "closed": closed}
    first = SPEC.get("tool", "get_weather")  # the scripted model calls the first offered
    return [tools[first], *(t for n, t in tools.items() if n != first)]


def make_llm() -> Any:
    from crewai import LLM

    return LLM(model="openai/scripted-model", base_url=os.environ["OPENAI_BASE_URL"],
               api_key="x", stream=bool(SPEC.get("stream")), max_retries=0,
               api=SPEC.get("api", "completions"))


def make_crew(turn: int) -> Any:
    from crewai import Agent, Crew, Task

    llm = make_llm()
    forecaster = Agent(role="Forecaster", goal="Report the weather",
                       backstory="A meteorologist.", llm=llm, tools=make_tools())
    writer = Agent(role="Writer", goal="Write it up", backstory="A writer.", llm=llm)
    forecast = Task(description=f"Weather in Paris? (turn {turn})",
                    expected_output="the weather", agent=forecaster)
    report = Task(description="Write one sentence about it.", expected_output="a sentence",
                  agent=writer)
    return Crew(name="WeatherCrew", agents=[forecaster, writer], tasks=[forecast, report])


def lone_agent() -> Any:
    from crewai import Agent

    return Agent(role="Forecaster", goal="Report the weather", backstory="A meteorologist.",
                 llm=make_llm(), tools=make_tools())


def drive(mode: str, turn: int) -> str:
    prompt = f"Weather in Paris? (turn {turn})"
    if mode == "kickoff":
        return str(make_crew(turn).kickoff().raw)
    if mode == "kickoff_async":
        return str(asyncio.run(make_crew(turn).kickoff_async()).raw)
    if mode == "akickoff":
        return str(asyncio.run(make_crew(turn).akickoff()).raw)
    if mode == "agent_kickoff":
        return str(lone_agent().kickoff(prompt).raw)
    if mode == "agent_kickoff_async":
        return str(asyncio.run(lone_agent().kickoff_async(prompt)).raw)
    raise ValueError(mode)


def main() -> None:
    guard_network()
    tel = None
    if SPEC.get("otelmw", True):
        import otelmw
        from otelmw.instrumentation.crewai import CrewAIInstrumentor

        inst = CrewAIInstrumentor()
        tel = instrumented(SPEC, "crewai-host-test", inst, ["crewai", "openai"])
        if SPEC.get("plugin"):
            otelmw.PluginManager().add_plugin("probe", otelmw_plugin)
        if SPEC.get("break"):  # an otelmw bug: before the model call, after the tool
            from otelmw.core.pipeline import Pipeline

            def bad_llm(self: Any, request: Any, execute: Any, **kw: Any) -> Any:
                raise RuntimeError("otelmw bug before the call")

            def bad_tool(self: Any, name: str, args: Any, execute: Any, **kw: Any) -> Any:
                execute(args)
                raise RuntimeError("otelmw bug after the call")

            Pipeline.run_llm = bad_llm  # type: ignore[method-assign]
            Pipeline.run_tool = bad_tool  # type: ignore[method-assign]
    if SPEC.get("user_hooks"):
        user_hooks()
    if SPEC.get("listener"):
        user_listener()
    out: dict[str, Any] = {"results": [], "errors": []}
    for i in range(SPEC.get("turns", 1)):
        try:
            out["results"].append(drive(SPEC.get("mode", "kickoff"), i))
        except Exception as exc:
            out["results"].append(None)
            out["errors"].append(f"{type(exc).__qualname__}: {exc}")
    if SPEC.get("uninstrument"):
        from crewai.crew import Crew

        inst.uninstrument()
        out["restored"] = not hasattr(vars(Crew)["kickoff"], "__wrapped__")
        out["after_result"] = drive("kickoff", 9)
    if _LISTENER is not None:
        from crewai.events import crewai_event_bus

        crewai_event_bus.flush() if hasattr(crewai_event_bus, "flush") else None
    out["tool_calls"] = TOOL_CALLS
    out["seen"] = SEEN
    out["events"] = EVENTS
    out["wrapped"] = WRAPPED
    print_result(out, tel)


if __name__ == "__main__":
    main()
