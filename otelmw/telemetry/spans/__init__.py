"""One object per span kind the observer makes, each in its own module.

Where a span is born (``start``), decorated, ended (``finish``/``end``) and failed
is answered by one file per kind, as ``opentelemetry-util-genai`` gives each
invocation type one module:

* ``operation``: what every kind shares: ``Signals`` (tracer, logger, the metric
  instruments every kind records to (``Instruments``), content policy, failure log),
  ``OpState`` (one call's span state), ``mark_error``/``mark_exception``, ``call_ids``,
  ``digest_once``;
* ``model_call``: the ``CLIENT`` span of a model call, as chat and embeddings share it;
* ``chat``: ``chat`` spans (request rewrites, SDK-layer enrichment, streams);
* ``embeddings``: ``embeddings`` spans;
* ``tool``: ``execute_tool`` spans and the normalized tool result;
* ``turn``: ``invoke_agent`` spans (agent turns);
* ``layer``: one span per request rewrite and per execution wrapper;
* ``step``: a host's own steps over several calls (a router), and a host's own
  attributes on a call's span.

``otelmw.telemetry.setup.observer.TelemetryObserver`` holds one object of each and routes
the seam's calls to them.
"""
