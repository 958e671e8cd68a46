"""The rules for what of the content leaves the process, and in what form.

* ``policy``: content capture (off by default; truncated and redacted when on) and the
  redactor every recorded message, description and reason passes;
* ``digests``: raw-result digests, from a canonical serialization a user can recompute;
* ``values``: attribute values made safe for OTLP (bounded, valid UTF-8, redacted errors).
"""
