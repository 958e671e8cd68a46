"""What every otelmw instrumentor shares: targets wrapped with wrapt, restored on
``uninstrument()``, and the telemetry observer ensured on the default pipeline."""

from __future__ import annotations

import functools
import importlib
import logging
import re
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit

import wrapt
from opentelemetry.instrumentation.dependencies import get_dependency_conflicts
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from ..core import (
    PipelineObserver,
    current_llm_call,
    enrich_llm_call,
    get_pipeline,
    install_observer,
    llm_call_current,
)

logger = logging.getLogger("otelmw")
T = TypeVar("T")

# wrapt ≥ 2 splits the C proxy base (BaseObjectProxy) from ObjectProxy.
_PROXY_BASE = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)

Wrapper = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def prepared_wrapper(prepared: Callable[[tuple[Any, ...], dict[str, Any]], Any],
                     run: Callable[[Any, tuple[Any, ...], dict[str, Any], Any], Any],
                     arun: Callable[[Any, tuple[Any, ...], dict[str, Any], Any], Awaitable[Any]],
                     *, is_async: bool,
                     async_flag: str | None = None) -> Wrapper:
    """A wrapt wrapper that hands the call to ``run(wrapped, args, kwargs, found)``
    (``await arun(...)`` in the async one), where ``found = prepared(args, kwargs)``; when
    ``prepared`` finds nothing (None) the call runs unobserved. ``async_flag``: a
    keyword with which the sync entry serves the async one (LiteLLM's
    ``completion(acompletion=True)``), so the call is the async wrapper's."""

    def traced(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        if async_flag is not None and kwargs.get(async_flag) is True:
            return atraced(wrapped, instance, args, kwargs)
        found = prepared(args, kwargs)
        if found is None:
            return wrapped(*args, **kwargs)
        return run(wrapped, args, kwargs, found)

    async def atraced(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
        found = prepared(args, kwargs)
        if found is None:
            return await wrapped(*args, **kwargs)
        return await arun(wrapped, args, kwargs, found)

    return atraced if is_async else traced


class CallStream:
    """A host's response iterator, stepped with its LLM call current, so that the
    provider SDK request it makes on its first step enriches the call's span instead of
    opening a second one (``AsyncCallStream``: the same for an async iterator)."""

    __slots__ = ("_call", "_inner")

    def __init__(self, inner: Any, call: Any) -> None:
        self._inner, self._call = inner, call

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        with llm_call_current(self._call):
            return next(self._inner)

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            with llm_call_current(self._call):
                close()


class AsyncCallStream:
    """``CallStream`` of an async iterator (``aclose`` too, when it has one)."""

    __slots__ = ("_call", "_inner")

    def __init__(self, inner: Any, call: Any) -> None:
        self._inner, self._call = inner, call

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        with llm_call_current(self._call):
            return await self._inner.__anext__()

    async def aclose(self) -> None:
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            with llm_call_current(self._call):
                await close()


def ensure_observer() -> None:
    """Install the telemetry observer on the default pipeline if none is there
    (under ``opentelemetry-instrument`` the distro has set the global providers)."""
    install_observer(_telemetry_observer)


def _telemetry_observer() -> PipelineObserver:
    from ..config import settings as cfg
    from ..telemetry.setup.observer import TelemetryObserver

    # Here the program is already running (an instrumentor installs this on the host's
    # import): a bad setting falls back to its default with one warning instead of
    # failing the import. ``configure()`` raises on the same values.
    return TelemetryObserver(failures=get_pipeline().failures, settings=cfg.load(strict=False))


def server_of(base_url: Any) -> tuple[str | None, int | None]:
    """(host, port) of a client's base URL (httpx.URL or str)."""
    if base_url is None:
        return None, None
    host = getattr(base_url, "host", None)
    port = getattr(base_url, "port", None)
    if host is None:
        try:
            parts = urlsplit(str(base_url))
        except ValueError:
            return None, None
        host, port = parts.hostname, parts.port
    if port is None:
        scheme = str(getattr(base_url, "scheme", "") or str(base_url).split(":", 1)[0])
        port = 443 if scheme == "https" else 80 if scheme == "http" else None
    return (str(host) if host else None), (int(port) if port else None)


def _client_server() -> Callable[[Any], tuple[str | None, int | None]]:
    """(host, port) of an SDK resource's client, with a one-entry cache keyed by
    the base URL's identity (one per wrapper: clients rarely change their URL)."""
    last: list[Any] = [(None, (None, None))]

    def server(instance: Any) -> tuple[str | None, int | None]:
        url = getattr(getattr(instance, "_client", None), "base_url", None)
        cached_url, found = last[0]  # read the pair once: safe across threads
        if url is None or url is not cached_url:
            found = server_of(url)
            last[0] = (url, found)
        return found  # type: ignore[no-any-return]

    return server


def sdk_embeddings_wrapper(provider: str, *, is_async: bool) -> Wrapper:
    """Wrapper for an SDK ``embeddings.create``: an ``embeddings`` span of its own,
    also inside a host-level chat call (it is never that call's request)."""
    _server = _client_server()

    def traced_embeddings(wrapped: Any, instance: Any, args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> Any:
        address, port = _server(instance)
        return get_pipeline().run_embeddings(kwargs, lambda request: wrapped(*args, **request),
                                             provider=provider, server_address=address,
                                             server_port=port)

    async def atraced_embeddings(wrapped: Any, instance: Any, args: tuple[Any, ...],
                                 kwargs: dict[str, Any]) -> Any:
        address, port = _server(instance)
        return await get_pipeline().arun_embeddings(
            kwargs, lambda request: wrapped(*args, **request), provider=provider,
            server_address=address, server_port=port)

    return atraced_embeddings if is_async else traced_embeddings


def sdk_llm_wrapper(provider: str, api_mode: str, *, is_async: bool) -> Wrapper:
    """Wrapper for an SDK ``create`` method: pipeline + ``chat`` span, or — when a
    host-level ``chat`` call is already in flight — enrichment of that span only."""
    _server = _client_server()

    def traced_create(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
        address, port = _server(instance)
        outer = current_llm_call()
        if outer is not None:  # a host-level chat call is in flight: enrich its span
            return enrich_llm_call(outer, wrapped(*args, **kwargs), address, port)
        return get_pipeline().run_llm(kwargs, lambda request: wrapped(*args, **request),
                                      provider=provider, api_mode=api_mode,
                                      server_address=address, server_port=port)

    async def atraced_create(wrapped: Any, instance: Any, args: tuple[Any, ...],
                             kwargs: dict[str, Any]) -> Any:
        address, port = _server(instance)
        outer = current_llm_call()
        if outer is not None:
            return enrich_llm_call(outer, await wrapped(*args, **kwargs), address, port)
        return await get_pipeline().arun_llm(kwargs, lambda request: wrapped(*args, **request),
                                   provider=provider, api_mode=api_mode,
                                   server_address=address, server_port=port)

    return atraced_create if is_async else traced_create


_warned_ranges: set[str] = set()
_warned_lock = threading.Lock()


def host_unsupported(name: str, dependencies: Collection[str]) -> str | None:
    """Why instrumentor ``name`` cannot instrument its host (not installed, or installed
    outside the supported range), or ``None`` when the host is in range. An installed
    host outside the range is logged at WARNING once per process, naming the package,
    the installed version and the range; a missing one at INFO (a program uses few
    hosts, the others are not worth a warning)."""
    conflict = get_dependency_conflicts(dependencies)
    if conflict is None:
        return None
    required = str(conflict.required)
    if not conflict.found:  # "<package> <version>" when installed
        package = re.split(r"[\s<>=!~;\[]", required, maxsplit=1)[0]
        reason = f"{package} is not installed"
        logger.info("otelmw: %s skipped: %s", name, reason)
        return reason
    reason = f"{conflict.found} is installed, outside the supported range {required}"
    with _warned_lock:
        first = required not in _warned_ranges
        _warned_ranges.add(required)
    if first:
        logger.warning("otelmw: %s not instrumented: %s (see README, Host instrumentors)",
                       name, reason)
    return reason


class OtelmwInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Subclasses list ``targets``: (module, "Class.method", wrapper)."""

    dependencies: tuple[str, ...] = ()
    entry_point = ""  # its name in the opentelemetry_instrumentor group
    skipped_because: str | None = None  # set when instrument() declined

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # otelmw's own are named after their module: otelmw_<x> for <this package>.<x>
        package, _, rest = cls.__module__.partition(f"{__package__}.")
        if not package and rest and "entry_point" not in vars(cls):
            cls.entry_point = "otelmw_" + rest.split(".", 1)[0]

    def instrumentation_dependencies(self) -> Collection[str]:
        return self.dependencies

    def instrument(self, **kwargs: Any) -> Any:
        """``BaseInstrumentor.instrument``, with an out-of-range host reported at
        WARNING: the SDK's own check logs it at DEBUG under ``opentelemetry-instrument``
        (``raise_exception_on_conflict``), where nobody sees it."""
        kwargs.pop("raise_exception_on_conflict", None)
        if not kwargs.pop("skip_dep_check", False):
            self.skipped_because = host_unsupported(self.entry_point or type(self).__name__,
                                                    self.instrumentation_dependencies())
            if self.skipped_because is not None:
                return None
        return super().instrument(skip_dep_check=True, **kwargs)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        raise NotImplementedError

    def result_normalizer(self) -> Any:
        """The host's tool-result normalizer (its ``runtime_id`` names the runtime), put
        on the default pipeline with the targets unless the program has one of its own
        for that runtime, and taken off again on ``uninstrument()``; ``None``: none."""
        return None

    # Instrumentation waits until the host's top-level package is imported, so a
    # program that never uses the host does not pay for importing it; with
    # ``wrap_each_on_import`` each target waits for its own module instead (a host
    # whose targets live in packages a program may import apart, or whose root
    # package is costly to import).
    root_module: str | None = None
    wrap_each_on_import = False
    _pending = False
    _generation = 0
    _normalizer: Any = None

    def _instrument(self, **kwargs: Any) -> None:
        ensure_observer()
        self._wrapped: list[tuple[str, str]] = []
        self._generation = getattr(self, "_generation", 0) + 1
        generation = self._generation
        if self.wrap_each_on_import:
            for module, name, wrapper in self.targets():
                wrapt.register_post_import_hook(functools.partial(
                    self._wrap_on_import, generation, module, name, wrapper), module)
            self._add_normalizer()
            self._after_instrument(**kwargs)
            return
        root = self.root_module
        if root is None or root in sys.modules:
            self._wrap_all(**kwargs)
            return

        def on_import(module: Any) -> None:
            if getattr(self, "_generation", 0) == generation and self._pending:
                self._pending = False
                try:
                    self._wrap_all(**kwargs)
                except Exception as exc:  # never break the import of the host
                    logger.warning("otelmw: %s failed: %s", type(self).__name__, exc)

        self._pending = True
        wrapt.register_post_import_hook(on_import, root)

    def _wrap_all(self, **kwargs: Any) -> None:
        for module, name, wrapper in self.targets():
            try:
                wrapt.wrap_function_wrapper(module, name, wrapper)
                self._wrapped.append((module, name))
            except (ImportError, AttributeError) as exc:
                logger.info("otelmw: %s: %s.%s not instrumented (%s)",
                            type(self).__name__, module, name, exc)
        self._add_normalizer()
        self._after_instrument(**kwargs)

    def _wrap_on_import(self, generation: int, module_name: str, name: str, wrapper: Wrapper,
                        module: Any) -> None:
        if generation != self._generation:  # a hook of an earlier instrument() round
            return
        try:
            owner, _, attr = name.rpartition(".")
            target = getattr(module, owner) if owner else module
            if not _wrapped_by(getattr(target, attr, None), wrapper):
                wrapt.wrap_function_wrapper(module, name, wrapper)
            # (else the re-export of a function wrapped in its own module: restored too)
            self._wrapped.append((module_name, name))
        except (ImportError, AttributeError) as exc:
            logger.info("otelmw: %s: %s.%s not instrumented (%s)",
                        type(self).__name__, module_name, name, exc)

    def _add_normalizer(self) -> None:
        normalizer = self._normalizer = self.result_normalizer()
        if normalizer is None:
            return
        normalizers = get_pipeline().normalizers
        if normalizers.has_middleware(normalizer.runtime_id):  # a program's own one wins
            self._normalizer = None
        else:
            normalizers.register(normalizer.runtime_id, normalizer)

    def _after_instrument(self, **kwargs: Any) -> None:
        """The host's own setup, once its targets are wrapped (or, with
        ``wrap_each_on_import``, once their hooks are in place)."""

    def _uninstrument(self, **kwargs: Any) -> None:
        self._generation = getattr(self, "_generation", 0) + 1  # cancel a pending hook
        if getattr(self, "_pending", False):
            self._pending = False
            return
        for module, name in reversed(getattr(self, "_wrapped", [])):
            unwrap_path(module, name)
        self._wrapped = []
        mine, self._normalizer = self._normalizer, None
        if mine is not None:
            runtime_id: str = mine.runtime_id
            normalizers = get_pipeline().normalizers
            if normalizers.lookup(runtime_id) is mine:
                normalizers.unregister(runtime_id)
        self._after_uninstrument(**kwargs)

    def _after_uninstrument(self, **kwargs: Any) -> None:
        pass


def unwrap_path(module: str, name: str) -> None:
    parent: Any = importlib.import_module(module)
    *path, attr = name.split(".")
    for part in path:
        parent = getattr(parent, part)
    current = parent.__dict__.get(attr) if hasattr(parent, "__dict__") else None
    if current is None:
        current = getattr(parent, attr, None)
    if isinstance(current, _PROXY_BASE):
        setattr(parent, attr, current.__wrapped__)


def _wrapped_by(function: Any, wrapper: Wrapper) -> bool:
    """Whether ``wrapper`` already wraps ``function``, under any wrappers of others (a
    peer instrumentation may have wrapped otelmw's wrapper of the function's own
    module before its re-export is reached)."""
    seen = 0
    while isinstance(function, wrapt.FunctionWrapper) and seen < 16:
        if getattr(function, "_self_wrapper", None) is wrapper:
            return True
        function, seen = function.__wrapped__, seen + 1
    return False
