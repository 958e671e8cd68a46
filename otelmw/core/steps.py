"""The step machine: every pipeline step is written once, as a generator, and run by
a synchronous driver (``drive``) or an asynchronous one (``adrive``).

A step generator does its work itself and hands the driver only what differs
between a synchronous and an asynchronous call, by yielding it:

* an ``Invoke`` (``(callback, kwargs)``): call ``callback(**kwargs)`` and send back
  what it returned (or throw in what it raised). The execution chain yields its
  callbacks instead of calling them so that, while a callback runs, no generator
  frame is on the stack: each layer costs two frames (the callback and the driver
  of the layer below), as a hand-written chain's would.
* an awaitable: ``adrive`` awaits it and sends back its result (or throws in what it
  raised). Steps yield one only when ``awaits`` is true (they run under ``adrive``);
  in a synchronous call each await point says itself what an awaitable means there
  (refused, counted, or handed back as a value), so ``drive`` never sees one.

A step whose ``except`` clauses look at what was thrown in (the execution chain's
levels, the request stage) runs under a driver of its own rather than by ``yield
from`` (``own_driver``): delegation closes the innermost generator on a
``GeneratorExit`` instead of throwing the raised one in.

Everything between two await points — the contract's rules, the bookkeeping, the
observer calls — exists once; that the two drivers differ only where one awaits is
what this module's two functions are.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")

# What a step generator yields (an ``Invoke`` or, under ``adrive``, an awaitable),
# what it is sent back, and what it returns.
Steps = Generator[Any, Any, T]
Invoke = tuple[Callable[..., Any], dict[str, Any]]


def drive(steps: Callable[..., Steps[T]], *args: Any) -> T:
    """Run ``steps(*args)`` in a synchronous call: perform each ``Invoke`` it yields."""
    gen = steps(*args)
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = gen.send(value) if error is None else gen.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        error = None
        try:
            value = effect[0](**effect[1])
        except BaseException as exc:  # thrown in at the yield, outside this handler
            value, error = None, exc


async def adrive(steps: Callable[..., Steps[T]], *args: Any) -> T:
    """Run ``steps(*args)`` in an asynchronous call: perform each ``Invoke`` it
    yields, await each awaitable."""
    gen = steps(*args)
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = gen.send(value) if error is None else gen.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        error = None
        try:
            if type(effect) is tuple:
                value = effect[0](**effect[1])
            else:
                value = await effect
        except BaseException as exc:  # thrown in at the yield, outside this handler
            value, error = None, exc


def host_call_steps(execute: Callable[[Any], Any], payload: Any, awaits: bool) -> Steps[Any]:
    """``execute(payload)``, the host's own call; awaited in an asynchronous call when
    it returns an awaitable (in a synchronous one, whatever it returns is the result)."""
    r = execute(payload)
    if awaits and hasattr(type(r), "__await__"):  # looked up on the type, as ``await`` does
        r = yield r
    return r


def own_driver(awaits: bool, steps: Callable[..., Steps[T]], *args: Any) -> Steps[T]:
    """``yield from own_driver(awaits, steps, ...)``: ``steps`` with a driver of its own
    in an asynchronous call. For steps that catch what an await raises: ``yield from``
    delegation would close them instead of throwing a ``GeneratorExit`` in (they would
    see a new one, not the one raised). A synchronous call throws nothing in."""
    if awaits:
        return (yield adrive(steps, *args))  # type: ignore[no-any-return]
    return (yield from steps(*args))
