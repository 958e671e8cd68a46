"""Host instrumentors (one module or package per host), each an OpenTelemetry
``BaseInstrumentor`` registered under the ``opentelemetry_instrumentor`` entry-point group
as ``otelmw_openai``, ``otelmw_anthropic``, ``otelmw_hermes``, ``otelmw_praisonai``."""
