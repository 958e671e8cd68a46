"""Attribute keys and span/metric names of otelmw's telemetry contract.

GenAI and general keys come from ``opentelemetry-semantic-conventions``; the
``otelmw.*`` keys are otelmw's own. Every key emitted must be documented in
``docs/telemetry.md`` (a test checks ``EMITTED_KEYS`` against it).
"""

from __future__ import annotations

from typing import Final

from opentelemetry.semconv._incubating.attributes import (
    gen_ai_attributes,
    jsonrpc_attributes,
    mcp_attributes,
)
from opentelemetry.semconv._incubating.attributes import openai_attributes as oai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes import (
    error_attributes,
    exception_attributes,
    network_attributes,
    server_attributes,
)

GEN_AI_OPERATION_NAME: Final = gen_ai_attributes.GEN_AI_OPERATION_NAME
GEN_AI_PROVIDER_NAME: Final = gen_ai_attributes.GEN_AI_PROVIDER_NAME
GEN_AI_REQUEST_MODEL: Final = gen_ai_attributes.GEN_AI_REQUEST_MODEL
GEN_AI_REQUEST_STREAM: Final = gen_ai_attributes.GEN_AI_REQUEST_STREAM
GEN_AI_REQUEST_TEMPERATURE: Final = gen_ai_attributes.GEN_AI_REQUEST_TEMPERATURE
GEN_AI_REQUEST_MAX_TOKENS: Final = gen_ai_attributes.GEN_AI_REQUEST_MAX_TOKENS
GEN_AI_REQUEST_TOP_P: Final = gen_ai_attributes.GEN_AI_REQUEST_TOP_P
GEN_AI_REQUEST_TOP_K: Final = gen_ai_attributes.GEN_AI_REQUEST_TOP_K
GEN_AI_REQUEST_FREQUENCY_PENALTY: Final = gen_ai_attributes.GEN_AI_REQUEST_FREQUENCY_PENALTY
GEN_AI_REQUEST_PRESENCE_PENALTY: Final = gen_ai_attributes.GEN_AI_REQUEST_PRESENCE_PENALTY
GEN_AI_REQUEST_SEED: Final = gen_ai_attributes.GEN_AI_REQUEST_SEED
GEN_AI_REQUEST_STOP_SEQUENCES: Final = gen_ai_attributes.GEN_AI_REQUEST_STOP_SEQUENCES
GEN_AI_REQUEST_CHOICE_COUNT: Final = gen_ai_attributes.GEN_AI_REQUEST_CHOICE_COUNT
GEN_AI_OUTPUT_TYPE: Final = gen_ai_attributes.GEN_AI_OUTPUT_TYPE
GEN_AI_RESPONSE_MODEL: Final = gen_ai_attributes.GEN_AI_RESPONSE_MODEL
GEN_AI_RESPONSE_ID: Final = gen_ai_attributes.GEN_AI_RESPONSE_ID
GEN_AI_RESPONSE_FINISH_REASONS: Final = gen_ai_attributes.GEN_AI_RESPONSE_FINISH_REASONS
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = gen_ai_attributes.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK
GEN_AI_USAGE_INPUT_TOKENS: Final = gen_ai_attributes.GEN_AI_USAGE_INPUT_TOKENS
GEN_AI_USAGE_OUTPUT_TOKENS: Final = gen_ai_attributes.GEN_AI_USAGE_OUTPUT_TOKENS
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = gen_ai_attributes.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = (
    gen_ai_attributes.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS)
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = gen_ai_attributes.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS
OPENAI_REQUEST_SERVICE_TIER: Final = oai.OPENAI_REQUEST_SERVICE_TIER
OPENAI_API_TYPE: Final = oai.OPENAI_API_TYPE
OPENAI_RESPONSE_SERVICE_TIER: Final = oai.OPENAI_RESPONSE_SERVICE_TIER
OPENAI_RESPONSE_SYSTEM_FINGERPRINT: Final = oai.OPENAI_RESPONSE_SYSTEM_FINGERPRINT
GEN_AI_TOKEN_TYPE: Final = gen_ai_attributes.GEN_AI_TOKEN_TYPE
GEN_AI_AGENT_NAME: Final = gen_ai_attributes.GEN_AI_AGENT_NAME
GEN_AI_CONVERSATION_ID: Final = gen_ai_attributes.GEN_AI_CONVERSATION_ID
GEN_AI_TOOL_NAME: Final = gen_ai_attributes.GEN_AI_TOOL_NAME
GEN_AI_TOOL_CALL_ID: Final = gen_ai_attributes.GEN_AI_TOOL_CALL_ID
GEN_AI_TOOL_TYPE: Final = gen_ai_attributes.GEN_AI_TOOL_TYPE
GEN_AI_TOOL_CALL_ARGUMENTS: Final = gen_ai_attributes.GEN_AI_TOOL_CALL_ARGUMENTS
GEN_AI_TOOL_CALL_RESULT: Final = gen_ai_attributes.GEN_AI_TOOL_CALL_RESULT
GEN_AI_INPUT_MESSAGES: Final = gen_ai_attributes.GEN_AI_INPUT_MESSAGES
GEN_AI_OUTPUT_MESSAGES: Final = gen_ai_attributes.GEN_AI_OUTPUT_MESSAGES
GEN_AI_SYSTEM_INSTRUCTIONS: Final = gen_ai_attributes.GEN_AI_SYSTEM_INSTRUCTIONS
GEN_AI_TOOL_DEFINITIONS: Final = gen_ai_attributes.GEN_AI_TOOL_DEFINITIONS
GEN_AI_EMBEDDINGS_DIMENSION_COUNT: Final = gen_ai_attributes.GEN_AI_EMBEDDINGS_DIMENSION_COUNT
GEN_AI_REQUEST_ENCODING_FORMATS: Final = gen_ai_attributes.GEN_AI_REQUEST_ENCODING_FORMATS
ERROR_TYPE: Final = error_attributes.ERROR_TYPE
EXCEPTION_TYPE: Final = exception_attributes.EXCEPTION_TYPE
EXCEPTION_MESSAGE: Final = exception_attributes.EXCEPTION_MESSAGE
EXCEPTION_STACKTRACE: Final = exception_attributes.EXCEPTION_STACKTRACE
SERVER_ADDRESS: Final = server_attributes.SERVER_ADDRESS
SERVER_PORT: Final = server_attributes.SERVER_PORT
# MCP (the otelmw_mcp host; semantic-conventions gen-ai/mcp.md)
MCP_METHOD_NAME: Final = mcp_attributes.MCP_METHOD_NAME
MCP_PROTOCOL_VERSION: Final = mcp_attributes.MCP_PROTOCOL_VERSION
MCP_SESSION_ID: Final = mcp_attributes.MCP_SESSION_ID
# otelmw_mcp's server side: what it made of the client's word on the contract it ran
OTELMW_MCP_CONTRACT_VERDICT: Final = "otelmw.mcp.contract.verdict"
OTELMW_MCP_CONTRACT_SKIPPED_PLUGINS: Final = "otelmw.mcp.contract.skipped_plugins"
JSONRPC_REQUEST_ID: Final = jsonrpc_attributes.JSONRPC_REQUEST_ID
NETWORK_TRANSPORT: Final = network_attributes.NETWORK_TRANSPORT

OTELMW_API_REQUEST_ID: Final = "otelmw.api_request.id"
OTELMW_RUNTIME_ID: Final = "otelmw.runtime.id"
OTELMW_TURN_ID: Final = "otelmw.turn.id"
OTELMW_TASK_ID: Final = "otelmw.task.id"
OTELMW_API_MODE: Final = "otelmw.api_mode"
OTELMW_MIDDLEWARE_KIND: Final = "otelmw.middleware.kind"
OTELMW_MIDDLEWARE_NAME: Final = "otelmw.middleware.name"
OTELMW_MIDDLEWARE_PLUGIN: Final = "otelmw.middleware.plugin"
OTELMW_MIDDLEWARE_POSITION: Final = "otelmw.middleware.position"
OTELMW_MIDDLEWARE_OUTCOME: Final = "otelmw.middleware.outcome"
OTELMW_REWRITE_SOURCE: Final = "otelmw.rewrite.source"
OTELMW_REWRITE_REASON: Final = "otelmw.rewrite.reason"
OTELMW_REWRITE_CHANGED_KEYS: Final = "otelmw.rewrite.changed_keys"
OTELMW_RESULT_SUCCESS: Final = "otelmw.result.success"
OTELMW_RESULT_ERROR_MESSAGE: Final = "otelmw.result.error_message"
OTELMW_RESULT_EXECUTION_TIME_MS: Final = "otelmw.result.execution_time_ms"
OTELMW_RESULT_METADATA_PREFIX: Final = "otelmw.result.metadata."
OTELMW_RESULT_RAW_DIGEST: Final = "otelmw.result.raw.digest"
OTELMW_RESULT_RAW_SIZE: Final = "otelmw.result.raw.size"
OTELMW_RESULT_RAW_TYPE: Final = "otelmw.result.raw.type"
OTELMW_RESULT_CONTENT_DIGEST: Final = "otelmw.result.content.digest"
OTELMW_RESULT_STATUS: Final = "otelmw.result.status"
OTELMW_TOOL_ARGS_DIGEST: Final = "otelmw.tool.args.digest"
OTELMW_REQUEST_DIGEST: Final = "otelmw.request.digest"
OTELMW_REQUEST_ORIGINAL_MODEL: Final = "otelmw.request.original_model"
OTELMW_STREAM_ENDED_BY: Final = "otelmw.stream.ended_by"
OTELMW_EXPORT_TRUNCATED: Final = "otelmw.export.truncated"
OTELMW_MIDDLEWARE_TRACE: Final = "otelmw.middleware_trace"
OTELMW_HOOK_NAME: Final = "otelmw.hook.name"
OTELMW_HOOK_FAILURES: Final = "otelmw.hook.failures"
OTELMW_SCHEMA_TELEMETRY: Final = "otelmw.schema.telemetry"
OTELMW_SCHEMA_MIDDLEWARE: Final = "otelmw.schema.middleware"

# OpenInference's span attributes (Arize Phoenix and other tools read them): the
# compatibility layer on middleware and agent spans. The openinference-semantic-
# conventions package is not a dependency; its key names are copied here.
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME_TYPE: Final = "output.mime_type"
METADATA: Final = "metadata"
OI_CHAIN: Final = "CHAIN"
OI_GUARDRAIL: Final = "GUARDRAIL"
MIME_JSON: Final = "application/json"
MIME_TEXT: Final = "text/plain"


# Event names (log records) of the GenAI conventions.
EV_INFERENCE_DETAILS: Final = "gen_ai.client.inference.operation.details"
EV_OPERATION_EXCEPTION: Final = "gen_ai.client.operation.exception"

# Span name prefixes (operation names of the GenAI conventions).
OP_CHAT: Final = "chat"
OP_EMBEDDINGS: Final = "embeddings"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_INVOKE_AGENT: Final = "invoke_agent"

# Metric names.
M_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
M_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
M_TIME_TO_FIRST_CHUNK: Final = gen_ai_metrics.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK
M_TIME_PER_OUTPUT_CHUNK: Final = gen_ai_metrics.GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK
M_TOOL_DURATION: Final = "gen_ai.execute_tool.duration"
M_AGENT_DURATION: Final = "gen_ai.invoke_agent.duration"
M_MIDDLEWARE_DURATION: Final = "otelmw.middleware.duration"
M_MIDDLEWARE_FAILURES: Final = "otelmw.middleware.failures"
M_REWRITES: Final = "otelmw.rewrites"
M_TOOL_RESULTS: Final = "otelmw.tool.results"
M_NORMALIZE_FAILURES: Final = "otelmw.normalize.failures"
M_HOOK_FAILURES: Final = "otelmw.hook.failures"

# GenAI semantic-convention advisory bucket boundaries.
DURATION_BUCKETS: Final = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24,
                           20.48, 40.96, 81.92)
TOKEN_BUCKETS: Final = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                        16777216, 67108864)
# Middleware callbacks are mostly sub-millisecond.
MIDDLEWARE_BUCKETS: Final = (0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1,
                             0.5, 1.0, 5.0)
