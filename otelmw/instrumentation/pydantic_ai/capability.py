"""otelmw as a pydantic-ai capability, added to each run (``instrumentor.add_to_run``).

pydantic-ai's capabilities are its middleware; otelmw's is one of them, ordered
``innermost`` so it sees what the user's capabilities made of the run:

* ``wrap_run`` → the run is a turn, ``invoke_agent {agent name}``;
* ``get_wrapper_model`` → each attempt at a model request (called per attempt, after
  every ``before_model_request`` / ``prepare_model_request`` hook) is one call through
  ``Pipeline.arun_llm``: otelmw's ``llm_request`` stage on the request as it is sent,
  its ``llm_execution`` chain around the provider request, one ``chat`` span per
  provider request (the provider SDK layer below only enriches it);
* ``wrap_tool_execute`` → each tool call is one call through ``Pipeline.arun_tool``
  around pydantic-ai's own tool lifecycle (``handler``, called once per otelmw base
  call): ``tool_request`` rewrites the arguments, a ``pre_tool_call`` block or a
  wrapper's answer becomes ``SkipToolExecution(result)``, the ``pydantic-ai``
  normalizer reads the result, ``transform_tool_result`` replaces what the model gets.

When pydantic-ai's own instrumentation is on for the run (``Agent.instrument``,
``Agent.instrument_all()``, an ``Instrumentation`` capability, logfire), its spans are
the run's: otelmw runs the same contract for the run with no telemetry of its own (a
pipeline twin without an observer), so each operation has one span.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from opentelemetry.trace import NoOpTracer
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.exceptions import (
    ApprovalRequired,
    CallDeferred,
    ModelRetry,
    SkipToolExecution,
    ToolRetryError,
)
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.wrapper import WrapperModel

from ...core import (
    CallInfo,
    Pipeline,
    Turn,
    get_pipeline,
    llm_call_current,
)
from .._base import server_of
from .requests import RequestView
from .results import RUNTIME_ID, ControlFlow, ToolOutcome, current_outcome, failed

# pydantic-ai's ``Model.system`` → the conventions' ``gen_ai.provider.name``.
_PROVIDERS = {"google-gla": "gcp.gemini", "google-vertex": "gcp.vertex_ai",
              "bedrock": "aws.bedrock", "mistral": "mistral_ai", "azure": "azure.ai.openai",
              "grok": "x_ai", "xai": "x_ai"}
_CONTROL_FLOW = (ModelRetry, ToolRetryError, SkipToolExecution, CallDeferred, ApprovalRequired)


def _twin(pipeline: Pipeline) -> Pipeline:
    """The pipeline's registrations without its observer: the contract, no spans."""
    twin = Pipeline(pipeline.registry, pipeline.normalizers, pipeline.failures)
    twin.memory_adapters = pipeline.memory_adapters
    return twin


class RunState:
    """One run's choices: the pipeline its calls go through, and whether otelmw's own
    spans are the run's (``False`` under pydantic-ai's own instrumentation)."""

    __slots__ = ("own_spans", "pipeline")

    def __init__(self, own_spans: bool) -> None:
        pipeline = get_pipeline()
        self.own_spans = own_spans
        self.pipeline = pipeline if own_spans else _twin(pipeline)


class OtelmwCapability(AbstractCapability[Any]):
    """otelmw's layer of one pydantic-ai run (see the module docstring)."""

    _state: RunState | None = None

    def get_ordering(self) -> CapabilityOrdering:
        return CapabilityOrdering(position="innermost")

    async def for_run(self, ctx: Any) -> OtelmwCapability:
        run = OtelmwCapability()
        try:  # pydantic-ai's own instrumentation gives the run a real tracer
            run._state = RunState(own_spans=isinstance(ctx.tracer, NoOpTracer))
        except Exception as exc:
            failed("run", exc)
        return run

    # ------------------------------------------------------------------ the turn
    async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
        state = self._state
        turn: Turn | None = None
        if state is not None and state.own_spans and not getattr(ctx, "realtime", False):
            try:
                agent = getattr(ctx, "agent", None)
                name = getattr(agent, "name", None)
                conversation = getattr(ctx, "conversation_id", None)
                turn = state.pipeline.turn(
                    name if isinstance(name, str) and name else "agent",
                    session_id=conversation if isinstance(conversation, str) else None,
                    runtime_id=RUNTIME_ID)
                turn.start()
            except Exception as exc:
                failed("turn_start", exc)
                turn = None
        try:
            result = await handler()
        except BaseException as exc:
            _finish(turn, exc)
            raise
        _finish(turn, None)
        return result

    # ------------------------------------------------------------ model requests
    def get_wrapper_model(self, model: Any) -> Any:
        if self._state is None:
            return None
        return OtelmwModel(model, self._state)

    # ---------------------------------------------------------------- tool calls
    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any,
                                handler: Any) -> Any:
        state = self._state
        if state is None:
            return await handler(args)
        out = ToolOutcome()

        async def execute(effective: Any) -> Any:
            out.executed = True
            try:
                out.result = await handler(effective)
            except _CONTROL_FLOW as exc:
                out.control = _control_flow(exc)
                return out.control
            except BaseException as exc:
                out.error = exc
                raise
            return out.result

        token = current_outcome.set(out)
        try:
            answer = await state.pipeline.arun_tool(
                call.tool_name, args, execute, tool_call_id=call.tool_call_id,
                runtime_id=RUNTIME_ID, raise_errors=True)
        except BaseException as exc:
            if exc is out.error:
                raise
            failed("execute_tool", exc)  # otelmw's own error: the host's outcome stands
            if not out.executed:
                return await handler(args)
            answer = out.control if out.control is not None else out.result
        finally:
            current_outcome.reset(token)
        return _tool_answer(out, answer)


def _finish(turn: Turn | None, error: BaseException | None) -> None:
    if turn is None:
        return
    try:
        turn.finish(error)
    except Exception as exc:
        failed("turn_finish", exc)


def _control_flow(exc: BaseException) -> ControlFlow:
    if isinstance(exc, ModelRetry):
        return ControlFlow("model_retry", exc.message, exc)
    if isinstance(exc, ToolRetryError):
        response_text = getattr(exc.tool_retry, "model_response", None)
        text = response_text() if callable(response_text) else str(exc)
        return ControlFlow("model_retry", text, exc)
    if isinstance(exc, SkipToolExecution):
        return ControlFlow("skip", exc.result, exc)
    return ControlFlow("deferred", type(exc).__name__, exc)


def _tool_answer(out: ToolOutcome, answer: Any) -> Any:
    """What pydantic-ai gets: the lifecycle's own result or control flow, unless an
    otelmw plugin answered instead (a block or a wrapper that did not call
    ``next_call``: ``SkipToolExecution``; ``transform_tool_result``: its text)."""
    if not out.executed:
        raise SkipToolExecution(answer)
    if out.control is not None:
        if answer is out.control or _is_default_answer(out, answer):
            raise out.control.error
        return answer
    if answer is out.result or _is_default_answer(out, answer):
        return out.result
    return answer


def _is_default_answer(out: ToolOutcome, answer: Any) -> bool:
    """The pipeline's answer is the normalized result's own text (no plugin changed it)."""
    norm = out.normalized
    if norm is None:
        return False
    try:
        return bool(answer == norm.model_text())
    except Exception:
        return False


# ---------------------------------------------------------------- model requests
def _provider(model: Any) -> str | None:
    system = getattr(model, "system", None)
    return _PROVIDERS.get(system, system) if isinstance(system, str) else None


def _api_mode(model: Any) -> str | None:
    kind = type(model).__name__
    return {"OpenAIChatModel": "chat_completions",
            "OpenAIResponsesModel": "responses"}.get(kind)


class OtelmwModel(WrapperModel):
    """The model serving one attempt, as otelmw sees it: its request goes through the
    pipeline (one ``chat`` call per provider request)."""

    def __init__(self, wrapped: Any, state: RunState) -> None:
        super().__init__(wrapped)
        self._state = state

    def _call(self, view: RequestView) -> dict[str, Any]:
        model = self.wrapped
        address, port = server_of(getattr(model, "base_url", None))
        return {"provider": _provider(model), "model": view.request["model"],
                "api_mode": _api_mode(model), "server_address": address,
                "server_port": port}

    def _marker(self, opts: dict[str, Any]) -> Any:
        """Without otelmw's own spans the provider SDK layer must not open one either:
        a model call of the run is current while the request is sent."""
        if self._state.own_spans:
            return None
        return CallInfo(operation="chat", provider=opts["provider"], model=opts["model"])

    def _prepared(self, messages: Any, model_settings: Any, model_request_parameters: Any,
                  stream: bool) -> tuple[RequestView, dict[str, Any], Any] | None:
        """(the request's view, its ``run_llm`` options, its marker), or None (an error
        of otelmw's, counted): the request is sent unobserved."""
        try:
            view = RequestView(self.wrapped.model_name, messages, model_settings,
                               model_request_parameters, stream=stream)
            opts = self._call(view)
            return view, opts, self._marker(opts)
        except Exception as exc:
            failed("chat", exc)
            return None

    async def request(self, messages: Any, model_settings: Any,
                      model_request_parameters: Any) -> Any:
        wrapped = self.wrapped
        prepared = self._prepared(messages, model_settings, model_request_parameters, False)
        if prepared is None:
            return await wrapped.request(messages, model_settings, model_request_parameters)
        view, opts, marker = prepared
        done: list[Any] = []  # the host's response, once sent
        error: list[BaseException] = []

        async def execute(effective: Any) -> Any:
            m, s, p = view.applied(effective)
            try:
                if marker is None:
                    response = await wrapped.request(m, s, p)
                else:
                    with llm_call_current(marker):
                        response = await wrapped.request(m, s, p)
            except BaseException as exc:
                error.append(exc)
                raise
            done.append(response)
            return response

        try:
            result = await self._state.pipeline.arun_llm(view.request, execute, **opts)
        except BaseException as exc:
            if error and exc is error[0]:
                raise
            failed("chat", exc)
            if not done and not error:
                return await wrapped.request(messages, model_settings, model_request_parameters)
            if error:
                raise error[0] from None
            return done[0]
        if isinstance(result, ModelResponse):
            return result
        failed("chat", TypeError(
            f"an llm_execution layer answered {type(result).__name__}, not a pydantic-ai "
            "ModelResponse: pydantic-ai gets the provider's response"))
        if done:
            return done[0]
        return await wrapped.request(messages, model_settings, model_request_parameters)

    @asynccontextmanager
    async def request_stream(self, messages: Any, model_settings: Any,
                             model_request_parameters: Any,
                             run_context: Any = None) -> AsyncIterator[Any]:
        wrapped = self.wrapped
        prepared = self._prepared(messages, model_settings, model_request_parameters, True)
        if prepared is None:
            async with wrapped.request_stream(messages, model_settings,
                                              model_request_parameters, run_context) as s:
                yield s
            return
        view, opts, marker = prepared
        opened = _OpenedStream()

        async def execute(effective: Any) -> Any:
            opened.started = True
            m, s, p = view.applied(effective)
            manager = wrapped.request_stream(m, s, p, run_context)
            try:
                if marker is None:
                    streamed = await manager.__aenter__()
                else:
                    with llm_call_current(marker):
                        streamed = await manager.__aenter__()
            except BaseException as exc:
                opened.error = exc
                raise
            opened.manager, opened.streamed = manager, streamed
            return opened.end

        ending: Any = None
        try:
            ending = await self._state.pipeline.arun_llm(view.request, execute, **opts)
        except BaseException as exc:
            if opened.started and opened.manager is None:
                raise  # the provider request failed: pydantic-ai sees it as without otelmw
            failed("chat", exc)  # otelmw's own error: the host's stream stands
        else:
            if opened.manager is None and opened.error is not None:
                raise opened.error  # a layer swallowed the provider's error
            if opened.manager is None:
                # A layer answered without calling next_call: a stream cannot be made of
                # its answer, so the request is sent (once) as without otelmw.
                failed("chat", TypeError("an llm_execution layer answered a streamed "
                                         "pydantic-ai request without calling next_call"))
        if opened.manager is None:
            async with wrapped.request_stream(messages, model_settings,
                                              model_request_parameters, run_context) as s:
                yield s
            return
        try:
            yield opened.streamed
        except BaseException as exc:
            opened.end.error = exc
            suppressed = await opened.manager.__aexit__(type(exc), exc, exc.__traceback__)
            await _drain(ending, exc)
            if not suppressed:
                raise
        else:
            await opened.manager.__aexit__(None, None, None)
            await _drain(ending, None)


class _StreamEnd:
    """The pipeline's view of a streamed response: pydantic-ai consumes the provider's
    stream itself, so this iterator ends (or raises what ended the stream) when the
    adapter drains it after pydantic-ai is done; the ``chat`` span ends then."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: BaseException | None = None

    def __aiter__(self) -> _StreamEnd:
        return self

    async def __anext__(self) -> Any:
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        raise StopAsyncIteration


class _OpenedStream:
    __slots__ = ("end", "error", "manager", "started", "streamed")

    def __init__(self) -> None:
        self.started = False
        self.error: BaseException | None = None
        self.manager: Any = None
        self.streamed: Any = None
        self.end = _StreamEnd()


async def _drain(ending: Any, error: BaseException | None) -> None:
    """Run the pipeline's stream to its end (the span ends with ``error``, if any)."""
    if ending is None:
        return
    try:
        async for _ in ending:
            pass
    except BaseException as exc:
        if exc is not error:
            if not isinstance(exc, Exception):
                raise
            failed("chat_stream", exc)
