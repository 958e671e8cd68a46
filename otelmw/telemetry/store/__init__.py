"""The local store: OTLP/JSON lines on disk (``otlp_json``, ``files``), the exporters
that write it, the readers the CLI uses, and ``replay`` to an OTLP endpoint."""
