"""The GenAI conventions' JSON schemas of the message attributes, and their validation.

``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.system_instructions`` and
``gen_ai.tool.definitions`` are checked with ``jsonschema`` against the copies under
``tests/data/semconv-genai/`` (origin in its ORIGIN.md) — and, because the schemas accept
any ``{"type": ...}`` object as a generic part, each part also against the definition of
its own type. Spans carry these attributes as JSON text, events structured: ``validate``
takes the text, ``validate_value`` the structure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from _support.components import require_module

DATA: Final = Path(__file__).resolve().parent.parent / "data" / "semconv-genai"
SCHEMA_FILES: Final = {"gen_ai.input.messages": "gen-ai-input-messages.json",
                       "gen_ai.output.messages": "gen-ai-output-messages.json",
                       "gen_ai.system_instructions": "gen-ai-system-instructions.json",
                       "gen_ai.tool.definitions": "gen-ai-tool-definitions.json"}
SCHEMAS: Final = {key: json.loads((DATA / name).read_text())
                  for key, name in SCHEMA_FILES.items()}
MESSAGE_KEYS: Final = tuple(SCHEMA_FILES)
PART_DEFS: Final = {"text": "TextPart", "tool_call": "ToolCallRequestPart",
                    "tool_call_response": "ToolCallResponsePart", "blob": "BlobPart",
                    "file": "FilePart", "uri": "UriPart", "reasoning": "ReasoningPart"}

_VALIDATORS: dict[tuple[str, str | None], Any] = {}


def _validator(key: str, definition: str | None = None) -> Any:
    """The schema of ``key`` (or one of its ``$defs``), checked and compiled once."""
    got = _VALIDATORS.get((key, definition))
    if got is None:
        jsonschema = require_module("jsonschema")
        schema = SCHEMAS[key]
        if definition is not None:
            schema = {"$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]}
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        got = _VALIDATORS[key, definition] = cls(schema)
    return got


def _check_part(key: str, part: dict[str, Any]) -> None:
    name = PART_DEFS.get(part.get("type"))  # type: ignore[arg-type]
    assert name is not None, f"not a part type of the conventions: {part}"
    _validator(key, name).validate(part)


def validate_value(key: str, value: Any) -> list[dict[str, Any]]:
    """``value`` (an event's structured attribute, as plain lists and dicts) is valid
    against ``key``'s schema, each part valid as its own type; returns it."""
    _validator(key).validate(value)
    assert isinstance(value, list) and value, (key, value)
    for item in value:
        if key == "gen_ai.tool.definitions":
            _validator(key, "FunctionToolDefinition" if item["type"] == "function" else
                       "GenericToolDefinition").validate(item)
        elif key == "gen_ai.system_instructions":
            _check_part(key, item)
        else:
            for part in item["parts"]:
                _check_part(key, part)
            if key == "gen_ai.output.messages":
                assert isinstance(item["finish_reason"], str)
    return value


def validate(key: str, text: Any) -> list[dict[str, Any]]:
    """``text`` (a span attribute) is a JSON string valid against ``key``'s schema, each
    part valid as its own type; returns the parsed value."""
    assert isinstance(text, str), (key, text)
    return validate_value(key, json.loads(text))
