"""otelmw's configuration: the only package that reads the process environment.

``settings`` names every ``OTEL_*``/``OTELMW_*`` variable otelmw reads, with its
parser, default and documentation; ``load()`` validates them once into an immutable
``Settings`` that ``configure()`` and ``otelmw run`` hand down to what they build.
``environment`` holds the few process-environment reads that are not settings (the
terminal's conventions, the environment a child program inherits). It imports the
standard library only, so every other package may import it.
"""
