"""Every setting otelmw reads, in one table, validated in one pass.

Each ``Setting`` names an environment variable, its parser, its default, the
values it allows and what it does. ``load()`` reads them all into one immutable
``Settings``; a bad value is reported the same way everywhere:

- ``load(strict=True)`` (``configure()``, ``otelmw run`` before it starts the
  program) raises ``ValueError`` naming the variable, the value, what is allowed
  and, when one is close, the value the user probably meant;
- ``load(strict=False)`` (auto-instrumentation inside a running program) logs one
  warning per bad setting and uses that setting's default — one typo never
  switches off the rest.

To add a setting, add one entry to the table below (``register`` checks the name
is new) and a row to docs/telemetry.md's configuration table
(``tests/test_settings.py`` checks both directions). Pure Python: the core may
import this module without OpenTelemetry.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Generic, NamedTuple, TypedDict, TypeVar

logger = logging.getLogger("otelmw")

T = TypeVar("T")


class Invalid(ValueError):
    """A parser's refusal: ``reason`` (what is expected) and an optional ``near``
    (the allowed value closest to what was given)."""

    def __init__(self, reason: str, near: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.near = reason, near


def closest(word: str, allowed: Iterable[str]) -> str | None:
    """The allowed value ``word`` most probably meant to be, if any is close."""
    options = list(allowed)
    lowered = {o.lower(): o for o in options}
    match = difflib.get_close_matches(word.strip().lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


@dataclass(frozen=True, slots=True)
class Setting(Generic[T]):
    """One environment variable: ``parse`` turns its (stripped, non-empty) text
    into a value or raises ``Invalid``/``ValueError``; unset or empty means
    ``default``."""

    name: str
    parse: Callable[[str], T]
    default: T
    doc: str
    allowed: tuple[str, ...] = ()
    secret: bool = False  # never echo the value in a message

    def problem(self, raw: str) -> str:
        """The one-line message for ``raw`` (which ``parse`` refused)."""
        try:
            self.parse(raw)
        except Invalid as exc:
            reason, near = exc.reason, exc.near
        except ValueError as exc:
            reason, near = str(exc), None
        else:  # pragma: no cover - only called for refused values
            return f"{self.name}={raw!r}"
        if self.secret:
            return f"{self.name} (hidden, {len(raw)} characters): {reason}"
        hint = f"; did you mean {near!r}?" if near is not None and near != raw else ""
        return f"{self.name}={raw!r}: {reason}{hint}"

    def validated(self, raw: str) -> T:
        """``raw`` given for this setting another way (a function's argument) parsed as the
        environment's value would be: unset or empty means the default; ``ValueError``
        with the one-line message otherwise."""
        raw = raw.strip()
        if not raw:
            return self.default
        try:
            return self.parse(raw)
        except ValueError:
            raise ValueError(self.problem(raw)) from None


# Process-wide runtime state: the lenient warnings already given (each once per process).
_warned: set[str] = set()


def _warn_once(message: str, setting: Setting[Any]) -> None:
    if message not in _warned:
        _warned.add(message)
        logger.warning("otelmw: %s; using the default (%s)", message,
                       _show_default(setting.default))


def _show_default(value: Any) -> str:
    if value is None or value == "" or value == ():
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


# ------------------------------------------------------------------ parsers
def choice(*values: str, aliases: Mapping[str, str] | None = None) -> Callable[[str], str]:
    """One of ``values`` (case-insensitive; returned in canonical spelling)."""
    canon = {v.lower(): v for v in values}
    alias = {k.lower(): v for k, v in (aliases or {}).items()}

    def parse(raw: str) -> str:
        key = raw.strip().lower()
        if key in canon:
            return canon[key]
        if key in alias:
            return alias[key]
        raise Invalid(f"expected one of {', '.join(values)}",
                      closest(raw, [*values, *alias]))
    return parse


def choices(*values: str) -> Callable[[str], tuple[str, ...]]:
    """A comma-separated list of ``values``."""
    one = choice(*values)

    def parse(raw: str) -> tuple[str, ...]:
        out = []
        for item in raw.split(","):
            if not item.strip():
                continue
            try:
                out.append(one(item))
            except Invalid as exc:
                raise Invalid(f"{item.strip()!r} is not one of {', '.join(values)}",
                              exc.near) from None
        return tuple(out)
    return parse


_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def boolean(raw: str) -> bool:
    key = raw.strip().lower()
    if key in _TRUE:
        return True
    if key in _FALSE:
        return False
    raise Invalid("expected true or false", closest(raw, ["true", "false"]))


def integer(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise Invalid(f"expected an integer{_range(minimum, maximum)}") from None
        _check_range(value, minimum, maximum, "an integer")
        return value
    return parse


def number(minimum: float | None = None, maximum: float | None = None
           ) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise Invalid(f"expected a number{_range(minimum, maximum)}") from None
        if value != value:  # NaN
            raise Invalid(f"expected a number{_range(minimum, maximum)}")
        _check_range(value, minimum, maximum, "a number")
        return value
    return parse


def _range(minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f" from {minimum:g} to {maximum:g}"
    if minimum is not None:
        return f" of at least {minimum:g}"
    if maximum is not None:
        return f" of at most {maximum:g}"
    return ""


def _check_range(value: float, minimum: float | None, maximum: float | None,
                 what: str) -> None:
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise Invalid(f"expected {what}{_range(minimum, maximum)}")


def text(raw: str) -> str:
    return raw.strip()


def secret_key(raw: str) -> str:
    """A secret of at least 16 characters (surrounding whitespace dropped)."""
    key = raw.strip()
    if len(key) < 16:
        raise Invalid("expected at least 16 characters (e.g. the output of "
                      "`openssl rand -hex 32`)")
    return key


def names(raw: str) -> tuple[str, ...]:
    """A comma-separated list of names."""
    return tuple(x.strip() for x in raw.split(",") if x.strip())


def resource_attributes(raw: str) -> str:
    """``key=value,key=value`` (values percent-encoded); kept as text, the SDK reads it."""
    for item in raw.split(","):
        key, sep, _ = item.partition("=")
        if item.strip() and (not sep or not key.strip()):
            raise Invalid(f"{item.strip()!r} is not key=value (expected key=value,key=value)")
    return raw.strip()


def directory(raw: str) -> Path:
    """A directory path; refused when it names an existing non-directory."""
    path = Path(raw).expanduser()
    if path.exists() and not path.is_dir():
        raise Invalid(f"{path} exists and is not a directory")
    return path


class WrapTarget(NamedTuple):
    """One ``OTELMW_WRAP`` entry: wrap ``module:qualname`` as an ``llm`` or ``tool`` call."""

    module: str
    qualname: str
    kind: str

    def __str__(self) -> str:
        return f"{self.module}:{self.qualname}={self.kind}"


def wrap_targets(spec: str) -> tuple[WrapTarget, ...]:
    """Parse ``OTELMW_WRAP``; raise ``ValueError`` naming the bad entry."""
    out: list[WrapTarget] = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        target, _, kind = item.partition("=")
        module, _, name = target.partition(":")
        kind = kind.strip()
        if module.strip() and name.strip() and not kind:  # no default: say what it is
            raise Invalid(f"entry {item!r} has no kind: write {target.strip()}=llm or "
                          f"{target.strip()}=tool")
        if not module.strip() or not name.strip() or kind not in ("llm", "tool"):
            raise Invalid(f"entry {item!r}: expected module:Qual.name=llm|tool",
                          closest(kind, ["llm", "tool"]) if module and name else None)
        out.append(WrapTarget(module.strip(), name.strip(), kind))
    return tuple(out)


# ------------------------------------------------------------------ registry
REGISTRY: dict[str, Setting[Any]] = {}


def register(setting: Setting[T]) -> Setting[T]:
    """Add ``setting`` to the table (its name must be new); returns it."""
    if setting.name in REGISTRY:
        raise ValueError(f"setting {setting.name} is already registered")
    REGISTRY[setting.name] = setting
    return setting


def _choice_setting(name: str, values: tuple[str, ...], default: str, doc: str, *,
                    aliases: Mapping[str, str] | None = None) -> Setting[str]:
    return register(Setting(name, choice(*values, aliases=aliases), default, doc,
                            allowed=values))


def _list_setting(name: str, values: tuple[str, ...], doc: str) -> Setting[tuple[str, ...]]:
    return register(Setting(name, choices(*values), (), doc, allowed=values))


def _int_setting(name: str, default: int, doc: str, minimum: int = 1,
                 maximum: int | None = None) -> Setting[int]:
    return register(Setting(name, integer(minimum, maximum), default, doc))


class BatchSettings(NamedTuple):
    """A batch processor's four settings, named as its constructor's arguments."""

    schedule_delay_millis: Setting[int]
    export_timeout_millis: Setting[int]
    max_queue_size: Setting[int]
    max_export_batch_size: Setting[int]


class BatchArgs(TypedDict):
    schedule_delay_millis: int
    export_timeout_millis: int
    max_queue_size: int
    max_export_batch_size: int


def _batch_settings(prefix: str, item: str, delay_ms: int) -> BatchSettings:
    return BatchSettings(
        _int_setting(f"{prefix}_SCHEDULE_DELAY", delay_ms, f"{item} batch delay (ms)"),
        _int_setting(f"{prefix}_EXPORT_TIMEOUT", 30000, f"{item} export timeout (ms)"),
        _int_setting(f"{prefix}_MAX_QUEUE_SIZE", 2048, f"{item} queue size"),
        _int_setting(f"{prefix}_MAX_EXPORT_BATCH_SIZE", 512,
                     f"{item}s per export (at most the queue size)"))


SIGNALS = ("traces", "metrics", "logs")
PROTOCOLS = ("grpc", "http/protobuf")
SIGNAL_EXPORTERS = {"traces": ("otlp", "console", "file", "none"),
                    "metrics": ("otlp", "console", "file", "prometheus", "none"),
                    "logs": ("otlp", "console", "file", "none")}
SAMPLERS = ("always_on", "always_off", "traceidratio", "parentbased_always_on",
            "parentbased_always_off", "parentbased_traceidratio")
CAPTURE_MODES = ("NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT")
HOOK_EVENT_MODES = ("registered", "all", "none")

# --- OpenTelemetry's standard variables that otelmw interprets
SDK_DISABLED = register(Setting("OTEL_SDK_DISABLED", boolean, False,
                                "`true`: install nothing; the pipeline still runs",
                                allowed=("true", "false")))
SERVICE_NAME = register(Setting("OTEL_SERVICE_NAME", text, "",
                                "resource `service.name`"))
RESOURCE_ATTRIBUTES = register(Setting("OTEL_RESOURCE_ATTRIBUTES", resource_attributes, "",
                                       "resource attributes, `key=value,…`"))
OTLP_ENDPOINT = register(Setting("OTEL_EXPORTER_OTLP_ENDPOINT", text, "",
                                 "OTLP endpoint; setting it selects `otlp`"))
OTLP_PROTOCOL = _choice_setting("OTEL_EXPORTER_OTLP_PROTOCOL", PROTOCOLS, "grpc",
                                "OTLP protocol")
SIGNAL_ENDPOINT = {s: register(Setting(f"OTEL_EXPORTER_OTLP_{s.upper()}_ENDPOINT", text, "",
                                       f"OTLP endpoint for {s}; selects `otlp` for {s}"))
                   for s in SIGNALS}
SIGNAL_PROTOCOL: dict[str, Setting[str | None]] = {
    s: register(Setting(f"OTEL_EXPORTER_OTLP_{s.upper()}_PROTOCOL", choice(*PROTOCOLS), None,
                        f"OTLP protocol for {s} (default: the general one)",
                        allowed=PROTOCOLS))
    for s in SIGNALS}
EXPORTERS = {s: _list_setting(f"OTEL_{s.upper()}_EXPORTER", SIGNAL_EXPORTERS[s],
                              f"exporters for {s}, comma-separated")
             for s in SIGNALS}
PROMETHEUS_HOST = register(Setting("OTEL_EXPORTER_PROMETHEUS_HOST", text, "127.0.0.1",
                                   "address the Prometheus scrape endpoint binds"))
PROMETHEUS_PORT = _int_setting("OTEL_EXPORTER_PROMETHEUS_PORT", 9464,
                               "port of the Prometheus scrape endpoint", 0, 65535)
SAMPLER = _choice_setting("OTEL_TRACES_SAMPLER", SAMPLERS, "parentbased_always_on",
                          "trace sampler")
SAMPLER_ARG = register(Setting("OTEL_TRACES_SAMPLER_ARG", number(0.0, 1.0), 1.0,
                               "ratio for the `traceidratio` samplers"))
SPAN_BATCH = _batch_settings("OTEL_BSP", "span", 5000)
LOG_BATCH = _batch_settings("OTEL_BLRP", "log record", 1000)
METRIC_EXPORT_INTERVAL = _int_setting("OTEL_METRIC_EXPORT_INTERVAL", 60000,
                                      "metric export interval (ms)")
METRIC_EXPORT_TIMEOUT = _int_setting("OTEL_METRIC_EXPORT_TIMEOUT", 30000,
                                     "metric export timeout (ms)")
DISABLED_INSTRUMENTATIONS: Setting[tuple[str, ...]] = register(Setting(
    "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", names, (),
    "instrumentors not to install, e.g. `otelmw_openai,otelmw_hermes`"))
CAPTURE_CONTENT = _choice_setting(
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", CAPTURE_MODES, "NO_CONTENT",
    "content capture", aliases={"true": "SPAN_ONLY", "false": "NO_CONTENT",
                                "1": "SPAN_ONLY", "0": "NO_CONTENT"})

# --- otelmw's own
CONTENT_MAX_LENGTH = _int_setting("OTELMW_CONTENT_MAX_LENGTH", 4096,
                                  "characters kept per captured value", minimum=16)
DATA_DIR = register(Setting("OTELMW_DATA_DIR", directory, Path(".otelmw"),
                            "embedded store directory"))
DATA_MAX_BYTES = _int_setting("OTELMW_DATA_MAX_BYTES", 16 * 1024 * 1024,
                              "store file size before it rolls over")
DATA_MAX_FILES = _int_setting("OTELMW_DATA_MAX_FILES", 20, "store files kept per signal")
DIGEST_MAX_BYTES = _int_setting("OTELMW_DIGEST_MAX_BYTES", 4 * 1024 * 1024,
                                "digest cap (bytes)", minimum=1024)
DIGEST_KEY = register(Setting(
    "OTELMW_DIGEST_KEY", secret_key, "",
    "key of the keyed digests (≥ 16 characters; default: generated once in "
    "`$OTELMW_HOME/digest.key`)", secret=True))
MCP_CONTRACT_KEY = register(Setting(
    "OTELMW_MCP_CONTRACT_KEY", secret_key, "",
    "`otelmw_mcp`: key of the signed word an MCP client sends on the plugins it ran "
    "for a `tools/call` (≥ 16 characters; a server honours only a word signed with its "
    "own key; default: none, every side runs its plugins)", secret=True))
EXPORT_MAX_BYTES = _int_setting("OTELMW_EXPORT_MAX_BYTES", 3 * 1024 * 1024,
                                "upper bound of one export request (bytes)",
                                minimum=64 * 1024)
SPOOL_MAX_BYTES = _int_setting("OTELMW_SPOOL_MAX_BYTES", 64 * 1024 * 1024,
                               "spool size for undeliverable telemetry (bytes; 0: off)",
                               minimum=0)
SHUTDOWN_TIMEOUT = register(Setting("OTELMW_SHUTDOWN_TIMEOUT", number(0.0), 5.0,
                                    "seconds allowed for the flush at exit"))
HOOK_EVENTS = _choice_setting("OTELMW_HOOK_EVENTS", HOOK_EVENT_MODES, "registered",
                              "which hook firings become log records")
MIDDLEWARE_METRICS = register(Setting(
    "OTELMW_MIDDLEWARE_METRICS", choice("on", "off", aliases={
        "true": "on", "1": "on", "yes": "on", "false": "off", "0": "off", "no": "off"}),
    "on", "record `otelmw.middleware.duration` per layer", allowed=("on", "off")))
NO_THREAD_PROPAGATION = register(Setting(
    "OTELMW_NO_THREAD_PROPAGATION", boolean, False,
    "`true`: do not patch threads to carry context", allowed=("true", "false")))
WRAP: Setting[tuple[WrapTarget, ...]] = register(Setting("OTELMW_WRAP", wrap_targets, (),
                        "`otelmw run`: targets to wrap on import"))
QUIET = register(Setting(
    "OTELMW_QUIET", boolean, False, "`1`: `otelmw run` prints no start and exit line",
    allowed=("true", "false")))
HOME: Setting[Path | None] = register(Setting(
    "OTELMW_HOME", directory, None,
    "plugin config directory and the digest key file (default `~/.otelmw`)"))


# ------------------------------------------------------------------ settings


@dataclass(frozen=True, slots=True)
class Settings:
    """Every registered setting's value, read once; ``settings[SETTING]``."""

    values: Mapping[str, Any]
    # names set (validly) in the environment, or by ``with_value`` (an argument)
    given: frozenset[str] = frozenset()
    problems: tuple[str, ...] = field(default=())  # lenient load: what fell back

    def __getitem__(self, setting: Setting[T]) -> T:
        value: T = self.values[setting.name]
        return value

    def with_value(self, setting: Setting[T], value: T) -> Settings:
        """A copy with ``setting`` at ``value``: what a caller's argument (``configure()``'s
        keyword arguments) makes of the environment's setting."""
        return Settings(MappingProxyType({**self.values, setting.name: value}),
                        self.given | {setting.name}, self.problems)

    def is_set(self, setting: Setting[Any]) -> bool:
        return setting.name in self.given

    def batch(self, settings: BatchSettings) -> BatchArgs:
        """A batch processor's keyword arguments."""
        return BatchArgs(schedule_delay_millis=self[settings.schedule_delay_millis],
                         export_timeout_millis=self[settings.export_timeout_millis],
                         max_queue_size=self[settings.max_queue_size],
                         max_export_batch_size=self[settings.max_export_batch_size])


def load(environ: Mapping[str, str] | None = None, *,
         strict: bool | Collection[Setting[Any]] = True) -> Settings:
    """Read and validate every registered setting (see the module docstring).

    ``strict``: ``True`` raises ``ValueError`` naming every bad value; ``False`` warns
    once per bad value and keeps its default; a collection of settings raises for a bad
    value of those (what the caller is about to use) and is lenient with the rest."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    given: set[str] = set()
    problems: list[tuple[str, Setting[Any]]] = []
    for name, setting in REGISTRY.items():
        raw = env.get(name, "").strip()
        if not raw:
            values[name] = setting.default
            continue
        try:
            values[name] = setting.parse(raw)
            given.add(name)
        except ValueError:
            problems.append((setting.problem(raw), setting))
            values[name] = setting.default
    for batch, queue in ((b.max_export_batch_size, b.max_queue_size)
                         for b in (SPAN_BATCH, LOG_BATCH)):
        if values[batch.name] > values[queue.name]:
            problems.append((f"{batch.name}={values[batch.name]} is larger than "
                             f"{queue.name}={values[queue.name]}", batch))
            values[batch.name] = min(batch.default, values[queue.name])
    refused = [message for message, setting in problems
               if strict is True or (strict is not False and setting in strict)]
    if refused:
        raise ValueError("; ".join(refused))
    for message, setting in problems:
        _warn_once(message, setting)
    return Settings(MappingProxyType(values), frozenset(given),
                    tuple(message for message, _ in problems))
