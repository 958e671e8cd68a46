"""Installing a distribution as pip would, for a child process to discover.

Plugins (``otelmw.plugins``) and instrumentors (``opentelemetry_instrumentor``) are found
through ``importlib.metadata`` entry points; a test that must exercise that discovery
writes a real ``*.dist-info`` beside its modules in a site directory and puts that
directory on the child's ``PYTHONPATH``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

PLUGINS = "otelmw.plugins"


def install_distribution(site: Path, name: str, entry_points: Mapping[str, Mapping[str, str]],
                         modules: Mapping[str, str]) -> Path:
    """Write distribution ``name`` 1.0 into ``site`` (created if missing): its modules
    (file name -> source) and its ``entry_points`` (group -> entry name -> ``module:attr``).
    Returns ``site``."""
    site.mkdir(parents=True, exist_ok=True)
    for filename, source in modules.items():
        (site / filename).write_text(source)
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{entry} = {target}\n" for entry, target in names.items())
        for group, names in entry_points.items()))
    return site


def on_pythonpath(env: dict[str, str], site: Path) -> dict[str, str]:
    """``env`` with ``site`` first on its ``PYTHONPATH`` (changed in place, returned)."""
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(site), env.get("PYTHONPATH")) if x)
    return env
