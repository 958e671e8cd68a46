"""What the installed openai/anthropic release can be asked, for the tests of calls
that an older supported release cannot make.

The host matrix runs the SDK tests on the floors as well (``scripts/envs/sdk-*.txt``:
openai 1.26, anthropic 0.51, and the newest openai 1.x / anthropic 0.x). A call the
installed release does not have (no Responses API, no tool runner, a request parameter
its ``create()`` does not take) is not something otelmw could instrument there: such a
test is skipped on that release with the reason, and runs on every other. Found by
looking at the SDK itself (its signatures and attributes), never by a version table.
With the SDK not installed nothing is skipped here: the ``host`` marker's rule applies.
"""

from __future__ import annotations

import importlib
import inspect
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import pytest


def _release(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _attr(path: str) -> Any:
    """``module.Class.attr`` (``None`` when any part is missing)."""
    module, _, rest = path.partition(":")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError:
        return None
    for part in rest.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


@cache
def _params(path: str) -> frozenset[str]:
    fn = _attr(path)
    return frozenset(inspect.signature(fn).parameters) if fn is not None else frozenset()


_CHAT_CREATE = "openai.resources.chat.completions:Completions.create"


def openai_lacks(*, responses: bool = False, chat_params: tuple[str, ...] = ()) -> list[str]:
    """What the installed openai lacks of what a test asks."""
    release = _release("openai")
    if release is None:
        return []
    missing = []
    if responses and _attr("openai.resources.responses:Responses") is None:
        missing.append(f"openai {release} has no Responses API (client.responses)")
    absent = [p for p in chat_params if p not in _params(_CHAT_CREATE)]
    if absent:
        missing.append(f"openai {release}'s chat.completions.create() takes no "
                       f"{', '.join(absent)}")
    return missing


_MESSAGES_CREATE = "anthropic.resources.messages.messages:Messages.create"


def anthropic_lacks(*, tool_runner: bool = False,
                    create_params: tuple[str, ...] = ()) -> list[str]:
    """What the installed anthropic lacks of what a test asks."""
    release = _release("anthropic")
    if release is None:
        return []
    missing = []
    if tool_runner and _attr(
            "anthropic.resources.beta.messages.messages:Messages.tool_runner") is None:
        missing.append(f"anthropic {release} has no beta.messages.tool_runner()")
    absent = [p for p in create_params if p not in _params(_MESSAGES_CREATE)]
    if absent:
        missing.append(f"anthropic {release}'s messages.create() takes no {', '.join(absent)}")
    return missing


def anthropic_takes_sampling() -> bool:
    """Whether ``messages.create`` takes temperature/top_p/top_k as parameters: the
    0.x and 1.x releases do (the conformance scenarios' release, 0.122, among them);
    anthropic 2.x takes them in ``extra_body`` only."""
    return "temperature" in _params(_MESSAGES_CREATE)


def needs(missing: list[str]) -> pytest.MarkDecorator:
    """Skip on a release that lacks what the test calls (the reasons in ``missing``)."""
    return pytest.mark.skipif(bool(missing), reason="; ".join(missing)
                              + " (a call of a newer release: nothing to instrument here)")


# LiteLLM: two behaviours of the entries themselves (no attribute tells them apart),
# measured without otelmw against the scripted server: 1.106.0 and 1.108.0 lack them,
# 1.109.0 and later have them.
_LITELLM_BEHAVIOURS = "1.109.0"


def litellm_lacks(*, async_flag: bool = False, stream_cost: bool = False) -> list[str]:
    """What the installed litellm lacks of what a test asks."""
    from packaging.version import Version

    release = _release("litellm")
    if release is None or Version(release) >= Version(_LITELLM_BEHAVIOURS):
        return []
    missing = []
    if async_flag:
        missing.append(f"litellm {release}'s completion(acompletion=True) fails without "
                       "otelmw too (no logging object unless acompletion() made one)")
    if stream_cost:
        missing.append(f"litellm {release} puts no response_cost on a stream's chunks")
    return missing


def lacks_behaviour(missing: list[str]) -> pytest.MarkDecorator:
    """Skip on a release whose host itself does not do what the test checks (the
    reasons in ``missing``, measured without otelmw)."""
    return pytest.mark.skipif(bool(missing), reason="; ".join(missing)
                              + " (the host's own behaviour there: nothing to observe)")
