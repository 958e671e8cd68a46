"""The metric instruments of the telemetry contract (created once per meter)."""

from __future__ import annotations

from opentelemetry.metrics import Meter

from . import attributes as a


class Instruments:
    __slots__ = ("agent_duration", "hook_failures", "middleware_duration",
                 "middleware_failures", "normalize_failures", "operation_duration",
                 "rewrites", "token_usage", "tool_duration", "tool_results")

    def __init__(self, meter: Meter) -> None:
        self.operation_duration = meter.create_histogram(
            a.M_OPERATION_DURATION, unit="s", description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(a.DURATION_BUCKETS))
        self.token_usage = meter.create_histogram(
            a.M_TOKEN_USAGE, unit="{token}", description="Tokens used per LLM request",
            explicit_bucket_boundaries_advisory=list(a.TOKEN_BUCKETS))
        self.tool_duration = meter.create_histogram(
            a.M_TOOL_DURATION, unit="s", description="Tool call duration",
            explicit_bucket_boundaries_advisory=list(a.DURATION_BUCKETS))
        self.agent_duration = meter.create_histogram(
            a.M_AGENT_DURATION, unit="s", description="Agent turn duration",
            explicit_bucket_boundaries_advisory=list(a.DURATION_BUCKETS))
        self.middleware_duration = meter.create_histogram(
            a.M_MIDDLEWARE_DURATION, unit="s",
            description="Duration of one middleware callback (wrappers include downstream)",
            explicit_bucket_boundaries_advisory=list(a.MIDDLEWARE_BUCKETS))
        self.middleware_failures = meter.create_counter(
            a.M_MIDDLEWARE_FAILURES, unit="{failure}",
            description="Middleware callbacks that failed (fail-open)")
        self.rewrites = meter.create_counter(
            a.M_REWRITES, unit="{rewrite}", description="Accepted request rewrites")
        self.tool_results = meter.create_counter(
            a.M_TOOL_RESULTS, unit="{result}", description="Normalized tool results")
        self.normalize_failures = meter.create_counter(
            a.M_NORMALIZE_FAILURES, unit="{failure}",
            description="Normalizers that raised or returned a wrong type")
        self.hook_failures = meter.create_counter(
            a.M_HOOK_FAILURES, unit="{failure}", description="Observer hooks that failed")
