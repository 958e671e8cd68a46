"""The middleware pipeline: everything here imports nothing from OpenTelemetry.

``otelmw.telemetry`` observes it through the seam, ``seam.PipelineObserver``; see
docs/architecture.md for the flow of one call through these modules.
"""
