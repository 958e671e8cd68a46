"""What the providers send and answer, in the shapes telemetry records.

* ``responses``: response facts (id, model, finish reasons, tokens) read from OpenAI
  chat completions, the Responses API and Anthropic messages, whole or streamed;
* ``messages``: those requests and responses in the GenAI conventions' message schemas;
* ``streams``: the stream proxies that end a ``chat`` span exactly once;
* ``events``: the GenAI events of a chat call (inference details, exception).
"""
