"""How telemetry is set up and attached to the pipeline.

* ``configuration``: ``configure()`` — settings to providers, processors and exporters;
* ``observer``: ``TelemetryObserver``, the pipeline's observer, routing to the span kinds;
* ``context``: safe attach/detach and carrying the context across threads.
"""
