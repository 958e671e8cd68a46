"""The metric instruments of the telemetry contract (created once per meter)."""

from __future__ import annotations

from opentelemetry.metrics import Histogram, Meter

from . import attributes as a


class Instruments:
    __slots__ = ("agent_duration", "hook_failures", "middleware_duration",
                 "middleware_failures", "normalize_failures", "operation_duration",
                 "rewrites", "time_per_output_chunk", "time_to_first_chunk", "token_usage",
                 "tool_duration", "tool_results")

    def __init__(self, meter: Meter) -> None:
        def histogram(name: str, unit: str, description: str,
                      buckets: tuple[float, ...]) -> Histogram:
            return meter.create_histogram(name, unit=unit, description=description,
                                          explicit_bucket_boundaries_advisory=list(buckets))

        self.operation_duration = histogram(a.M_OPERATION_DURATION, "s",
                                            "GenAI operation duration", a.DURATION_BUCKETS)
        self.token_usage = histogram(a.M_TOKEN_USAGE, "{token}", "Tokens used per LLM request",
                                     a.TOKEN_BUCKETS)
        # Streamed responses, as the GenAI conventions and the official
        # instrumentations define them (the operation-duration buckets).
        self.time_to_first_chunk = histogram(
            a.M_TIME_TO_FIRST_CHUNK, "s",
            "Time from the request to the first chunk of its response stream",
            a.DURATION_BUCKETS)
        self.time_per_output_chunk = histogram(
            a.M_TIME_PER_OUTPUT_CHUNK, "s",
            "Time between two chunks of a response stream (one point per chunk after the first)",
            a.DURATION_BUCKETS)
        self.tool_duration = histogram(a.M_TOOL_DURATION, "s", "Tool call duration",
                                       a.DURATION_BUCKETS)
        self.agent_duration = histogram(a.M_AGENT_DURATION, "s", "Agent turn duration",
                                        a.DURATION_BUCKETS)
        self.middleware_duration = histogram(
            a.M_MIDDLEWARE_DURATION, "s",
            "Duration of one middleware callback (wrappers include downstream)",
            a.MIDDLEWARE_BUCKETS)
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
