"""Where a LiteLLM call goes: ``gen_ai.provider.name`` and ``server.*`` from LiteLLM's
own resolution (``litellm.get_llm_provider``), mapped to the GenAI conventions'
well-known provider names; cached per model and endpoint arguments."""

from __future__ import annotations

from typing import Any, NamedTuple

from .._base import server_of

# LiteLLM's ``custom_llm_provider`` → the conventions' ``gen_ai.provider.name`` well-known
# values (opentelemetry-semantic-conventions ``GenAiProviderNameValues``). Any other
# provider keeps LiteLLM's own name (``ollama``, ``openrouter``, ``hosted_vllm``, …).
PROVIDER_NAMES: dict[str, str] = {
    "openai": "openai",
    "text-completion-openai": "openai",
    "azure": "azure.ai.openai",
    "azure_text": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "anthropic": "anthropic",
    "anthropic_text": "anthropic",
    "bedrock": "aws.bedrock",
    "vertex_ai": "gcp.vertex_ai",
    "vertex_ai_beta": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "cohere": "cohere",
    "cohere_chat": "cohere",
    "deepseek": "deepseek",
    "groq": "groq",
    "mistral": "mistral_ai",
    "xai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
    "watsonx_text": "ibm.watsonx.ai",
    "perplexity": "perplexity",
}

# Where LiteLLM sends a provider's requests when no ``api_base`` is given (its own
# defaults and settings, read as its provider handlers read them: ``get_secret_str``).
_DEFAULT_BASES: dict[str, tuple[tuple[str, ...], str]] = {
    "openai": (("OPENAI_BASE_URL", "OPENAI_API_BASE"), "https://api.openai.com"),
    "anthropic": (("ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"), "https://api.anthropic.com"),
}


class Endpoint(NamedTuple):
    """The provider (conventions' name) and server of one LiteLLM model string."""

    provider: str | None
    address: str | None
    port: int | None


_UNKNOWN = Endpoint(None, None, None)
_MAX_ENDPOINTS = 256
_endpoints: dict[tuple[Any, ...], Endpoint] = {}


def endpoint_of(request: dict[str, Any]) -> Endpoint:
    """The endpoint of a LiteLLM call's keyword arguments (``model``, and the
    ``custom_llm_provider`` / ``api_base`` / ``base_url`` that change where it goes)."""
    model = request.get("model")
    if not isinstance(model, str):
        return _UNKNOWN
    import litellm

    forced, base = request.get("custom_llm_provider"), request.get("api_base") or request.get(
        "base_url")
    key = (model, forced if isinstance(forced, str) else None,
           base if isinstance(base, str) else None, getattr(litellm, "api_base", None))
    found = _endpoints.get(key)
    if found is None:
        found = _resolve(litellm, model, key[1], key[2], key[3])
        if len(_endpoints) >= _MAX_ENDPOINTS:
            _endpoints.clear()
        _endpoints[key] = found
    return found


def _resolve(litellm: Any, model: str, forced: str | None, base: str | None,
             global_base: str | None) -> Endpoint:
    try:
        _, provider, _, dynamic_base = litellm.get_llm_provider(
            model=model, custom_llm_provider=forced, api_base=base)
    except Exception:  # LiteLLM raises the same for the call itself
        return _UNKNOWN
    provider = provider if isinstance(provider, str) and provider else None
    base = base or (dynamic_base if isinstance(dynamic_base, str) else None)
    if base is None and provider in _DEFAULT_BASES:
        names, default = _DEFAULT_BASES[provider]
        # LiteLLM's own reader of its settings (environment or secret manager)
        found = (n for n in (litellm.get_secret_str(name) for name in names) if n)
        base = (global_base if provider == "openai" else None) or next(found, default)
    address, port = server_of(base) if base else (None, None)
    return Endpoint(PROVIDER_NAMES.get(provider, provider) if provider else None,
                    address, port)
