"""Delivery: the export guard (bounded strings and requests, drop accounting,
``guard``, ``request_size``), the spool that keeps what an outage refuses (``spool``)
and the flush at process exit and on signals (``process_exit``)."""
