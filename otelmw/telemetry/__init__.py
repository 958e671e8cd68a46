"""OpenTelemetry for the otelmw pipeline: observer, digests, content policy, setup."""

from .configuration import Telemetry, configure, current
from .content import ContentPolicy, default_redactor, set_redactor
from .context import carry, instrument_threads, safe_detach, uninstrument_threads
from .digests import canonical_bytes, digest
from .observer import TelemetryObserver

__all__ = [
    "ContentPolicy",
    "Telemetry",
    "TelemetryObserver",
    "canonical_bytes",
    "carry",
    "configure",
    "current",
    "default_redactor",
    "digest",
    "instrument_threads",
    "safe_detach",
    "set_redactor",
    "uninstrument_threads",
]
