"""OpenTelemetry for the otelmw pipeline: observer, digests, content policy, setup."""

import sys as _sys

from .content import digests as digests
from .content.digests import canonical_bytes, digest
from .content.policy import ContentPolicy, default_redactor, set_redactor
from .setup.configuration import Telemetry, configure, current
from .setup.context import carry, instrument_threads, safe_detach, uninstrument_threads
from .setup.observer import TelemetryObserver

# docs/telemetry.md tells users to recompute a digest with
# ``otelmw.telemetry.digests.canonical_bytes``: that path stays the same module object
# as its home in ``content/`` (tests/test_public_names.py pins it).
STABLE_MODULES = {"digests": "content.digests"}
for _old, _new in STABLE_MODULES.items():
    _sys.modules[f"{__name__}.{_old}"] = _sys.modules[f"{__name__}.{_new}"]
del _old, _new

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
