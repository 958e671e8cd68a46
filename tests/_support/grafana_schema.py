"""Grafana's published dashboard schema (npm ``@grafana/schema``), type-checked with
``tsc``: the strictest check of a dashboard file possible without a Grafana server.

Each dashboard becomes a TypeScript module whose object literals must satisfy the
schema's types: ``Dashboard`` for the whole file, and per panel the panel plugin's own
``Options`` (and the time series' ``FieldConfig``) from ``@grafana/schema``'s
composable types. ``satisfies`` on an object literal rejects unknown keys, missing
required keys and wrong value types. The JSON holds an enum's value, not the enum, so
the types are checked through ``Json<T>`` (each string enum as the union of its values).
A panel's options may leave out what its plugin defaults (Grafana merges the plugin's
defaults in when it loads a panel): they are checked as ``Defaulted<...>``, every key
optional, unknown keys and wrong types still errors. The dashboard itself is checked
whole, required keys included.

npm packages are installed on first use into ``.cache/node/grafana-schema-<key>``
(``key`` hashes the pins below); missing ``npm``/``node``: a failure under CI, a skip
elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from _support.components import REPO, unavailable

GRAFANA_SCHEMA_VERSION = "13.0.1"  # = the compose file's grafana/grafana image
TYPESCRIPT_VERSION = "5.9.3"
# Panel plugin id -> (module, type names: options, field config custom or None).
PANEL_TYPES: dict[str, tuple[str, str, str | None]] = {
    "timeseries": ("@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/"
                   "TimeSeriesPanelCfg_types.gen", "Options", "FieldConfig"),
    "stat": ("@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen",
             "Options", None),
}
_JSON_TYPE = ("type Json<T> = T extends string ? `${T}` : T extends (infer U)[] ? Json<U>[]"
              " : T extends object ? { [K in keyof T]: Json<T[K]> } : T;\n"
              "type Defaulted<T> = T extends (infer U)[] ? Defaulted<U>[]"
              " : T extends object ? { [K in keyof T]?: Defaulted<T[K]> } : T;")


def node_modules() -> Path:
    """The installed packages (installed now when missing)."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        unavailable("`npm` and `node`")
    pins = f"@grafana/schema@{GRAFANA_SCHEMA_VERSION} typescript@{TYPESCRIPT_VERSION}"
    key = hashlib.sha256(pins.encode()).hexdigest()[:12]
    prefix = REPO / ".cache" / "node" / f"grafana-schema-{key}"
    if not (prefix / ".complete").exists():
        shutil.rmtree(prefix, ignore_errors=True)
        prefix.mkdir(parents=True)
        (prefix / "package.json").write_text('{"private": true}\n', encoding="utf-8")
        proc = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--ignore-scripts",
             "--prefix", str(prefix), *pins.split()],
            capture_output=True, text=True, timeout=600, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"npm install {pins} failed:\n{proc.stdout}\n{proc.stderr}")
        (prefix / ".complete").touch()
    return prefix / "node_modules"


def _panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for panel in panels:
        out.append(panel)
        out += _panels(panel.get("panels") or [])
    return out


def check_source(dashboard: dict[str, Any]) -> str:
    """The TypeScript module that type-checks ``dashboard``."""
    lines = ["import type { Dashboard } from '@grafana/schema';"]
    for plugin, (module, options, custom) in PANEL_TYPES.items():
        names = [f"{options} as {plugin}_{options}"]
        if custom:
            names.append(f"{custom} as {plugin}_{custom}")
        lines.append(f"import type {{ {', '.join(names)} }} from '{module}';")
    lines += [_JSON_TYPE, f"export const dashboard = ({json.dumps(dashboard)}) "
              "satisfies Json<Dashboard>;"]
    for i, panel in enumerate(_panels(dashboard.get("panels") or [])):
        kind = panel.get("type")
        if kind == "row":
            continue
        if kind not in PANEL_TYPES:
            raise AssertionError(f"panel {panel.get('title')!r}: no schema check for {kind!r}")
        _module, options, custom = PANEL_TYPES[kind]
        lines.append(f"// panel {panel.get('title')!r}")
        lines.append(f"export const options_{i} = ({json.dumps(panel.get('options', {}))}) "
                     f"satisfies Defaulted<Json<{kind}_{options}>>;")
        defaults_custom = (panel.get("fieldConfig") or {}).get("defaults", {}).get("custom")
        if custom and defaults_custom is not None:
            lines.append(f"export const custom_{i} = ({json.dumps(defaults_custom)}) "
                         f"satisfies Defaulted<Json<{kind}_{custom}>>;")
    return "\n".join(lines) + "\n"


def type_check(dashboard: dict[str, Any], workdir: Path) -> subprocess.CompletedProcess[str]:
    """``tsc --noEmit --strict`` of :func:`check_source` in ``workdir``."""
    modules = node_modules()
    workdir.mkdir(parents=True, exist_ok=True)
    link = workdir / "node_modules"
    if not link.exists():
        link.symlink_to(modules, target_is_directory=True)
    source = workdir / "dashboard_check.ts"
    source.write_text(check_source(dashboard), encoding="utf-8")
    node = shutil.which("node") or "node"
    return subprocess.run(
        [node, str(modules / "typescript" / "bin" / "tsc"), "--noEmit", "--strict",
         "--skipLibCheck", "--moduleResolution", "bundler", "--module", "esnext",
         "--target", "es2022", str(source)],
        cwd=workdir, capture_output=True, text=True, timeout=300, check=False)
