"""PraisonAI's ``OpenAIClient`` with SDK clients that are not the SDK's own objects, for
``tests/test_host_praisonai.py``: a ``MagicMock`` (PraisonAI's own
``test_create_completion_accepts_response_format``) and a ``__getattr__`` proxy around a
real ``openai.OpenAI`` talking to ``OPENAI_BASE_URL``. Prints ``RESULT <json>``."""

from __future__ import annotations

import json
import os
import traceback
from typing import Any
from unittest.mock import MagicMock


class Forwarding:
    """A resource or client whose attributes all come from ``__getattr__``."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self._children: dict[str, Forwarding] = {}

    def __getattr__(self, name: str) -> Any:
        if name in ("chat", "completions", "responses"):
            if name not in self._children:
                self._children[name] = Forwarding(getattr(self._target, name))
            return self._children[name]
        return getattr(self._target, name)


def main() -> None:
    import openai
    from praisonaiagents.llm.openai_client import OpenAIClient

    from otelmw import get_pipeline
    from otelmw.instrumentation.praisonai import PraisonAIInstrumentor
    from otelmw.telemetry import configure

    tel = configure(service_name="praisonai-foreign")
    inst = PraisonAIInstrumentor()
    inst.instrument()
    out: dict[str, Any] = {"errors": []}
    messages = [{"role": "user", "content": "test"}]
    response_format = {"type": "json_schema", "json_schema": {
        "name": "test_output", "schema": {"type": "object"}, "strict": True}}

    # 1. PraisonAI's own test: a MagicMock SDK client, assertions on its ``create``
    mock_client = MagicMock()
    mock_client.chat.completions.create.return_value = MagicMock()
    client = OpenAIClient(api_key="test-key", base_url=os.environ["OPENAI_BASE_URL"])
    client._sync_client = mock_client
    try:
        client.create_completion(messages=messages, model="gpt-4o-mini",
                                 response_format=response_format)
        mock_client.chat.completions.create.assert_called_once()
        call_args = mock_client.chat.completions.create.call_args
        out["mock_response_format"] = call_args.kwargs.get("response_format") == response_format
    except Exception:
        out["errors"].append("mock: " + traceback.format_exc())

    # 2. a __getattr__ proxy around the real SDK client: the request is made (and traced)
    real = openai.OpenAI(api_key="dummy", base_url=os.environ["OPENAI_BASE_URL"],
                         max_retries=0)
    client = OpenAIClient(api_key="test-key", base_url=os.environ["OPENAI_BASE_URL"])
    client._sync_client = Forwarding(real)
    try:
        answer = client.create_completion(messages=messages, model="gpt-4o-mini")
        out["proxy_answer"] = answer.choices[0].message.content
        out["proxy_response_id"] = answer.id
    except Exception:
        out["errors"].append("proxy: " + traceback.format_exc())

    # 3. uninstrument: the mock's own ``create`` answers again, with its call record
    inst.uninstrument()
    try:
        create = mock_client.chat.completions.create
        out["mock_after_uninstrument"] = [type(create).__name__, create.call_count]
    except Exception:
        out["errors"].append("after: " + traceback.format_exc())
    out["failures"] = {":".join(k): v for k, v in get_pipeline().failures.counts.items()}
    tel.shutdown(15)
    print("RESULT " + json.dumps(out, default=str), flush=True)


if __name__ == "__main__":
    main()
