"""``embeddings`` spans: born in ``ModelCallSpans.start``, ended with the
encoding format, dimension count, answering model and input tokens."""

from __future__ import annotations

from typing import Any

from ...core.contract import CallInfo
from .. import attributes
from ..content.values import clean_str as _c
from ..content.values import otlp_number
from ..shapes import gemini
from ..shapes.responses import EmbeddingsFacts
from .model_call import ModelCallSpans
from .operation import OpState, perf_counter


class EmbeddingsSpans(ModelCallSpans):
    """The ``embeddings`` span of an embeddings call."""

    def finish(self, call: CallInfo, op: OpState, result: Any,
               error: BaseException | None) -> Any:
        op.leave_context()
        span, duration = op.span, perf_counter() - op.start
        facts = EmbeddingsFacts()
        if error is None:
            facts.absorb(result)
            if facts.dimensions is None:  # Google Gen AI: ``embeddings[0].values``
                facts.dimensions = gemini.embedding_dimensions(result)
        response_model = self.response_model(op, facts.model)
        if span.is_recording():
            attrs: dict[str, Any] = {}
            request = op.request
            dimensions = facts.dimensions
            if isinstance(request, dict):
                fmt = request.get("encoding_format")
                if isinstance(fmt, str) and fmt:
                    attrs[attributes.GEN_AI_REQUEST_ENCODING_FORMATS] = [_c(fmt, 64)]
                # The returned vectors' length wins over the asked ``dimensions``
                # (the official OpenAI instrumentation's order): it is what came back.
                asked = otlp_number(request.get("dimensions"))
                if dimensions is None and type(asked) is int and asked > 0:
                    dimensions = asked
            if dimensions is not None:
                attrs[attributes.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = dimensions
            if response_model:
                attrs[attributes.GEN_AI_RESPONSE_MODEL] = response_model
            if facts.input_tokens is not None:
                attrs[attributes.GEN_AI_USAGE_INPUT_TOKENS] = facts.input_tokens
            span.set_attributes(attrs)
        self.close(op, duration, error, facts.input_tokens, None)
        return result
