"""A LangChain model request as otelmw's middleware sees it, and back.

otelmw's ``llm_request`` middleware gets the request every other host hands it: an
OpenAI chat-shaped dict (``model``, ``messages`` with the system message first,
``tools`` as OpenAI tool schemas, ``tool_choice``, the model's parameters). A rewrite is
a complete replacement of that dict; only the keys it changed go back into LangChain's
own request (``ModelRequest.override``): ``messages`` (an unchanged message keeps its
LangChain object), ``tools`` (an unchanged schema keeps its tool), ``tool_choice``, and
every other key as a model setting (``model_settings``, bound to the model as a call
argument, e.g. ``temperature``, ``max_tokens`` or ``model``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ...core import changed_payload_keys

# LangChain's ``ls_provider`` → the GenAI conventions' ``gen_ai.provider.name``.
PROVIDERS = {"openai": "openai", "azure": "azure.ai.openai", "anthropic": "anthropic",
             "bedrock": "aws.bedrock", "amazon_bedrock": "aws.bedrock",
             "google_vertexai": "gcp.vertex_ai", "google_genai": "gcp.gemini",
             "groq": "groq", "mistral": "mistral_ai", "mistralai": "mistral_ai",
             "xai": "x_ai", "deepseek": "deepseek", "cohere": "cohere",
             "ibm": "ibm.watsonx.ai", "perplexity": "perplexity"}
# Request keys that are not model settings.
_STRUCTURE = frozenset({"messages", "tools", "tool_choice"})


class ModelFacts(NamedTuple):
    """What a chat span needs to know about the model before the call."""

    provider: str | None
    model: str | None
    api_mode: str | None
    params: dict[str, Any]  # temperature, max_tokens, stop the model itself sets


def model_facts(model: Any, settings: dict[str, Any]) -> ModelFacts:
    """Provider, model name and parameters of a chat model (LangChain's own tracing
    parameters, ``_get_ls_params``)."""
    ls: dict[str, Any] = {}
    get_params = getattr(model, "_get_ls_params", None)
    if callable(get_params):
        try:
            ls = dict(get_params(**settings))
        except Exception:  # a model whose parameters need more: the name is enough
            ls = {}
    name = ls.get("ls_model_name") or getattr(model, "model_name", None) or getattr(
        model, "model", None)
    provider_id = ls.get("ls_provider")
    provider = PROVIDERS.get(provider_id, provider_id) if isinstance(provider_id, str) else None
    api_mode = None
    if provider == "openai":
        api_mode = "responses" if getattr(model, "use_responses_api", False) else (
            "chat_completions")
    params = {key: ls[f"ls_{key}"] for key in ("temperature", "max_tokens", "stop")
              if ls.get(f"ls_{key}") is not None}
    return ModelFacts(provider, name if isinstance(name, str) else None, api_mode, params)


_tool_schemas: dict[int, tuple[Any, dict[str, Any]]] = {}


def tool_schema(tool: Any) -> dict[str, Any]:
    """A tool as an OpenAI tool schema (dict tools, the provider's built-ins, as they
    are); remembered per tool object: an agent offers the same tools on every call."""
    if isinstance(tool, dict):
        return tool
    found = _tool_schemas.get(id(tool))
    if found is not None and found[0] is tool:
        return found[1]
    from langchain_core.utils.function_calling import convert_to_openai_tool

    schema = convert_to_openai_tool(tool)
    if len(_tool_schemas) > 512:  # tools made per call: forget, never grow
        _tool_schemas.clear()
    _tool_schemas[id(tool)] = (tool, schema)
    return schema


def request_view(model: Any, system: Any, messages: Sequence[Any], tools: Sequence[Any],
                 tool_choice: Any, settings: dict[str, Any], facts: ModelFacts
                 ) -> dict[str, Any]:
    """The OpenAI chat-shaped request of one model call."""
    from langchain_core.messages import convert_to_openai_messages

    view: dict[str, Any] = {"model": facts.model} if facts.model else {}
    view["messages"] = convert_to_openai_messages(
        [system, *messages] if system is not None else list(messages))
    if tools:
        view["tools"] = [tool_schema(t) for t in tools]
    if tool_choice is not None:
        view["tool_choice"] = tool_choice
    view.update(facts.params)
    view.update(settings)
    return view


def _messages_back(before: list[Any], originals: list[Any], after: Any) -> list[Any]:
    """LangChain messages of the rewritten ``after`` list: a message whose view is
    unchanged keeps its object."""
    from langchain_core.messages import convert_to_messages

    out: list[Any] = []
    for item in after or ():
        kept = next((originals[i] for i, seen in enumerate(before)
                     if seen is item or seen == item), None)
        out.append(kept if kept is not None else convert_to_messages([dict(item)])[0])
    return out


def _tools_back(before: list[Any], originals: list[Any], after: Any) -> list[Any]:
    out: list[Any] = []
    for item in after or ():
        kept = next((originals[i] for i, seen in enumerate(before)
                     if seen is item or seen == item), None)
        out.append(kept if kept is not None else dict(item))
    return out


class Rewritten(NamedTuple):
    """What a rewritten view changes in LangChain's request."""

    system: Any
    messages: list[Any] | None  # None: unchanged
    tools: list[Any] | None
    tool_choice: Any
    tool_choice_changed: bool
    settings: dict[str, Any] | None


def rewritten(view: dict[str, Any], after: Any, system: Any, messages: Sequence[Any],
              tools: Sequence[Any], settings: dict[str, Any]) -> Rewritten:
    """The parts of a LangChain request that ``after`` (a rewrite of ``view``) changed."""
    if not isinstance(after, dict):
        raise TypeError(f"a LangChain model request must stay a dict, got {type(after).__name__}")
    changed = set(changed_payload_keys(view, after)) | (set(view) ^ set(after))
    new_system, new_messages = system, None
    if "messages" in changed:
        originals = [system, *messages] if system is not None else list(messages)
        rebuilt = _messages_back(view.get("messages") or [], originals, after.get("messages"))
        from langchain_core.messages import SystemMessage

        if system is not None:  # the first system message is the request's own
            first = rebuilt[0] if rebuilt else None
            new_system = first if isinstance(first, SystemMessage) else None
            rebuilt = rebuilt[1:] if new_system is not None else rebuilt
        new_messages = rebuilt
    new_tools = _tools_back(view.get("tools") or [], list(tools), after.get("tools")) if (
        "tools" in changed) else None
    new_settings = None
    setting_keys = changed - _STRUCTURE
    if setting_keys:
        new_settings = dict(settings)
        for key in setting_keys:
            if key in after:
                new_settings[key] = after[key]
            else:
                new_settings.pop(key, None)
    return Rewritten(new_system, new_messages, new_tools, after.get("tool_choice"),
                     "tool_choice" in changed, new_settings)
