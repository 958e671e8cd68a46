"""The default redactor, form by form, and where it applies: captured content, tool
error messages (recorded by default), exception status descriptions and free-text
middleware ``reason``s."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _support.calls import TOOL, run_call
from _support.components import require_module
from _support.telemetry import TelemetryHarness, all_exported_text
from hypothesis import given, settings
from hypothesis import strategies as st

from otelmw.telemetry import default_redactor, set_redactor
from otelmw.telemetry.content import policy
from otelmw.telemetry.content.policy import NO_CONTENT, REDACTED, SPAN_AND_EVENT

R = REDACTED
# (form, text, the text as it must be exported); the secret is what differs.
REDACTION_TABLE: list[tuple[str, str, str]] = [
    ("key=value", "password=hunter2 next", f"password={R} next"),
    ("key=value in a query string", "GET /v1?api_key=abcd1234&q=x",
     f"GET /v1?api_key={R}&q=x"),
    ("key: value", "secret: s3cr3t-value", f"secret: {R}"),
    ("header", "X-Api-Key: 9f8e7d6c5b4a", f"X-Api-Key: {R}"),
    ("env style", "GITHUB_TOKEN=abc123def456", f"GITHUB_TOKEN={R}"),
    ("client secret", "client_secret = 'xyz-987-abc'", f"client_secret = '{R}'"),
    ("python dict repr", "{'password': 'hunter2'}", f"{{'password': '{R}'}}"),
    ("python repr with spaces in the value", "{'passphrase': 'correct horse battery'}",
     f"{{'passphrase': '{R}'}}"),
    ("json", '{"api_key": "abcd1234", "user": "bob"}', f'{{"api_key": "{R}", "user": "bob"}}'),
    ("json with an escaped quote in the value", '{"password": "pa\\"ss"}',
     f'{{"password": "{R}"}}'),
    ("json inside a json string", '{"q": "{\\"password\\": \\"s3cr3t\\"}"}',
     f'{{"q": "{{\\"password\\": \\"{R}\\"}}"}}'),
    ("authorization token scheme", "Authorization: Token abcdef1234567890",
     f"Authorization: Token {R}"),
    ("authorization basic in a dict repr",
     "{'Authorization': 'Basic dXNlcjpQYXNzd29yZA=='}", f"{{'Authorization': 'Basic {R}'}}"),
    ("authorization bearer", "authorization=Bearer abc.def.ghi123", f"authorization=Bearer {R}"),
    ("bearer in free text", "sent Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig today",
     f"sent Bearer {R} today"),
    ("basic in free text", "with Basic dXNlcjpwYXNzMTIz then", f"with Basic {R} then"),
    ("token scheme in free text", "header Token 0a1b2c3d4e5f6a7b", f"header Token {R}"),
    ("openai key", "key sk-proj-AbCdEf0123456789xyz end", f"key {R} end"),
    ("anthropic key", "sk-ant-api03-abcdefghijklmnop", R),
    ("stripe key", "sk_live_51HxYzAbCdEfGh", R),
    ("aws access key id", "AKIAIOSFODNN7EXAMPLE in use", f"{R} in use"),
    ("github token", "ghp_abcdefghijklmnopqrstuvwxyz0123", R),
    ("github fine-grained token", "github_pat_11ABCDEFG0123456789_abcdefghij", R),
    ("slack token", "xoxb-1234567890-abcdefghij", R),
    ("gitlab token", "glpat-abcdefghij0123456789", R),
    ("google api key", "AIzaSyA1234567890abcdefghijklmnopqrstuv", R),
    ("hugging face token", "hf_abcdefghijklmnopqrstuvwxyz0123456789", R),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
     R),
    ("url with password", "postgres://bob:s3cret@db.internal:5432/app",
     f"postgres://bob:{R}@db.internal:5432/app"),
    ("private key block", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE "
     "KEY-----", R),
]
# Text that looks close but holds no credential: unchanged.
UNCHANGED = [
    "max_tokens=100, token_count: 5, input_tokens: 12",
    "author: Bob; authority=high",
    "Basic usage: call it with Token support",
    "bearer of bad news",
    "the password policy says: at least 12 characters",
    "nothing secret here",
]


@pytest.mark.parametrize(("form", "text", "expected"), REDACTION_TABLE,
                         ids=[row[0] for row in REDACTION_TABLE])
def test_default_redactor_masks_each_credential_form(form: str, text: str,
                                                     expected: str) -> None:
    assert default_redactor(text) == expected


@pytest.mark.parametrize("text", UNCHANGED)
def test_default_redactor_leaves_look_alikes_unchanged(text: str) -> None:
    assert default_redactor(text) == text


def _every_expression(text: str) -> str:
    """The default redactor's five expressions run over every text (what it did before
    it learnt to skip the ones a text cannot match)."""
    if "PRIVATE KEY" in text:
        text = policy._PRIVATE_KEY.sub(R, text)
    if "://" in text:
        text = policy._URL_PASSWORD.sub(r"\1" + R + r"\2", text)
    text = policy._KEY_VALUE.sub(policy._mask_key_value, text)
    text = policy._AUTH_SCHEME.sub(lambda m: m.group("scheme") + R, text)
    return policy._KNOWN_KEYS.sub(R, text)


# Pieces of credential forms, near misses and the characters around them (case
# variants and characters that case-insensitive matching equates with ASCII letters:
# the long s, the Kelvin sign, dotted and dotless i).
_PIECES = ["api_key", "API-KEY", "apiKey", "x-api-key", "access_key", "SESSION_ID",
           "session-key", "private_key", "Authorization", "auth", "AUTH", "secret",
           "ſecret", "paſſword", "password", "Passwd", "passphrase", "pwd", "TOKEN", "token",
           "cookie", "credentials", "credential", "apiKey", "\u212a", "İ", "ı", "id",
           "author", "max_tokens", ":", "=", " : ", " = ", " ", " " * 40, " " * 70, "\t",
           "\n", '"', "'", "\\", '\\"', ",", ";", "&", "}", "hunter2", "s3cr3t-value",
           "abc.def.ghi123", "Bearer ", "bearer\t", "BEARER ", "Basic ", "Token ", "Digest ",
           "dXNlcjpQYXNzd29yZA==", "sk-", "sk-ant-", "pk-", "rk_", "sk_live_", "sk_test_",
           "AKIA", "ASIA", "IOSFODNN7EXAMPLE", "ghp_", "gho_", "github_pat_", "xoxb-",
           "xapp-", "glpat-", "AIza", "hf_", "npm_", "eyJ", "eyJhbGciOiJIUzI1NiJ9", ".",
           "abcdefghijklmnopqrstuvwxyz0123456789", "ABCDEFGHIJ", "0123456789",
           "postgres://", "bob:", "@db", "-----BEGIN RSA PRIVATE KEY-----", "MIIEow",
           "-----END RSA PRIVATE KEY-----", "é", "\u2028"]


@settings(max_examples=3000, deadline=None, database=None)
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=6)), max_size=24))
def test_default_redactor_skips_only_expressions_a_text_cannot_match(
        pieces: list[str]) -> None:
    """Each expression is skipped only when a cheap test says the text cannot match it:
    the result is the same as running all five over every text."""
    text = "".join(pieces)
    assert default_redactor(text) == _every_expression(text)


@pytest.mark.parametrize("text", [row[1] for row in REDACTION_TABLE] + UNCHANGED)
def test_the_table_reads_the_same_with_every_expression_run(text: str) -> None:
    assert default_redactor(text) == _every_expression(text)


def test_the_default_redactor_answers_a_text_seen_before_from_memory() -> None:
    """An agent sends its earlier messages on every call: the default redactor's answer
    for a text is kept; a redactor of the program's own is asked every time."""
    text = "my password=hunter2 again"
    assert policy.redact(text) == f"my password={R} again"
    assert policy._REDACTED.answers.get(text) == f"my password={R} again"
    assert policy.redact(text) == f"my password={R} again"
    seen: list[str] = []

    def own(value: str) -> str:
        seen.append(value)
        return value.upper()

    set_redactor(own)
    try:
        assert [policy.redact(text), policy.redact(text)] == [text.upper()] * 2
    finally:
        set_redactor(None)
    assert seen == [text, text]
    # Bounded: a text too big to be worth keeping is not kept.
    big = "x" * (policy.REDACTED_CACHE_CHARS // 16)
    assert policy.redact(big) == big and big not in policy._REDACTED.answers


@pytest.fixture
def harness() -> Iterator[TelemetryHarness]:
    h = TelemetryHarness(NO_CONTENT, hook_events="all")
    yield h
    h.close()


def _secret_of(text: str, expected: str) -> str:
    """The part of ``text`` the table says must go (longest run absent from expected)."""
    parts = [p for p in text.replace("'", " ").replace('"', " ").split()
             if len(p) >= 6 and p not in expected]
    return max(parts, key=len) if parts else text


@pytest.mark.parametrize(("form", "text", "expected"), REDACTION_TABLE,
                         ids=[row[0] for row in REDACTION_TABLE])
def test_tool_error_messages_and_exceptions_are_redacted_by_default(
        form: str, text: str, expected: str, harness: TelemetryHarness) -> None:
    def tool(args: Any) -> Any:
        raise RuntimeError(f"upstream said: {text}")

    def llm(request: Any) -> Any:
        raise ValueError(f"provider said: {text}")

    run_call(harness.pipeline, "sync", "tool", {"a": 1}, tool)
    with pytest.raises(ValueError):
        run_call(harness.pipeline, "sync", "llm", {"messages": []}, llm)
    span = harness.one(f"execute_tool {TOOL}")
    assert span.attributes["otelmw.result.error_message"] == f"upstream said: {expected}"
    exported = "\n".join(all_exported_text(harness))
    assert _secret_of(text, expected) not in exported
    assert f"provider said: {expected}" in exported  # the chat span's status description


@pytest.mark.parametrize("mode", [NO_CONTENT, SPAN_AND_EVENT])
def test_middleware_reasons_pass_through_the_redactor(mode: str) -> None:
    h = TelemetryHarness(mode, hook_events="all")
    try:
        reason = "added header {'Authorization': 'Basic dXNlcjpQYXNzd29yZA=='}"

        def rewrite(**kw: Any) -> Any:
            return {"args": {**kw["args"], "x": 1}, "reason": reason, "source": "auth"}

        h.pipeline.registry.add_middleware("tool_request", rewrite, "auth")
        h.pipeline.registry.add_hook("post_tool_call", lambda **kw: None, "obs")
        run_call(h.pipeline, "sync", "tool", {"a": 1}, lambda a: "ok")
        rewrite_span = [s for s in h.spans() if "otelmw.rewrite.reason" in s.attributes]
        assert len(rewrite_span) == 1
        assert rewrite_span[0].attributes["otelmw.rewrite.reason"] == \
            f"added header {{'Authorization': 'Basic {R}'}}"
        exported = "\n".join(all_exported_text(h))
        assert "dXNlcjpQYXNzd29yZA" not in exported
        traces = [t for t in all_exported_text(h) if t.startswith("[{") and "reason" in t]
        assert traces and all(f"Basic {R}" in t for t in traces)  # hook events' traces
    finally:
        h.close()


def test_an_installed_redactor_applies_to_error_messages_and_reasons(
        harness: TelemetryHarness) -> None:
    set_redactor(lambda text: text.replace("internal-host-42", "<host>"))
    try:
        def tool(args: Any) -> Any:
            raise RuntimeError("cannot reach internal-host-42")

        run_call(harness.pipeline, "sync", "tool", {"a": 1}, tool)
    finally:
        set_redactor(None)
    span = harness.one(f"execute_tool {TOOL}")
    assert span.attributes["otelmw.result.error_message"] == "cannot reach <host>"
    assert span.status.description == "cannot reach <host>"


@pytest.mark.parametrize("mode", [NO_CONTENT, SPAN_AND_EVENT])
def test_provider_error_description_follows_the_capture_mode(mode: str) -> None:
    openai = require_module("openai")
    import httpx

    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    body = {"message": "Invalid content: the user's text sk-proj-AbCdEf0123456789xyz",
            "type": "invalid_request_error", "param": None, "code": "content_invalid"}
    exc = openai.BadRequestError("Error code: 400 - " + str(body),
                                 response=httpx.Response(400, request=request), body=body)
    h = TelemetryHarness(mode)
    try:
        def llm(request: Any) -> Any:
            raise exc

        with pytest.raises(openai.BadRequestError):
            run_call(h.pipeline, "sync", "llm", {"messages": []}, llm)
        description = h.spans()[-1].status.description
    finally:
        h.close()
    if mode == NO_CONTENT:
        assert description == ("BadRequestError: HTTP 400, invalid_request_error, "
                               "code content_invalid")
    else:  # content is on spans anyway: the message, redacted
        assert "Invalid content: the user's text" in description
        assert "sk-proj-AbCdEf" not in description
