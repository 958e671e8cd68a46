"""Objects that refuse to be printed: their ``__str__``/``__repr__`` raise (or
return a non-string), for the tests that hand them to otelmw as tool results,
errors and values."""

from __future__ import annotations

from typing import Any


class HostileStrError(Exception):
    """An exception whose ``__str__`` and ``__repr__`` raise."""

    def __str__(self) -> str:
        raise RuntimeError("HostileStrError.__str__ refused")

    def __repr__(self) -> str:
        raise RuntimeError("HostileStrError.__repr__ refused")


class NonStrStrError(Exception):
    """An exception whose ``__str__`` returns a non-string (``str()`` raises TypeError)."""

    def __str__(self) -> Any:
        return 42


class HostileStr:
    def __str__(self) -> str:
        raise RuntimeError("HostileStr.__str__ refused")


class HostileRepr:
    def __repr__(self) -> str:
        raise RuntimeError("HostileRepr.__repr__ refused")


class HostileBoth:
    def __str__(self) -> str:
        raise ValueError("HostileBoth.__str__ refused")

    def __repr__(self) -> str:
        raise ValueError("HostileBoth.__repr__ refused")


class ReprRaisesHostileError:
    """``str()``/``repr()`` raise an exception that itself cannot be printed."""

    def __str__(self) -> str:
        raise HostileStrError()

    def __repr__(self) -> str:
        raise HostileStrError()
