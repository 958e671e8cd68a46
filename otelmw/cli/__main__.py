"""``python -m otelmw.cli``: the ``otelmw`` command."""

from . import main

raise SystemExit(main())
