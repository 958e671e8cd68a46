"""Plugins: validation at registration, entry-point loading, enablement, reload, CLI."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from _support.calls import MODES, OPS, named, run_call
from _support.cli import otelmw as run_otelmw
from _support.distributions import PLUGINS, install_distribution

import otelmw
import otelmw.core.plugins as plugins_mod
from otelmw import Pipeline, PluginManager
from otelmw.cli import main as cli_main


class FakeEntryPoint:
    """What ``PluginManager.entry_points`` hands out: ``.name`` and ``.load()``."""

    def __init__(self, name: str, obj: Any = None, error: BaseException | None = None) -> None:
        self.name = name
        self._obj, self._error = obj, error
        self.loads = 0

    def load(self) -> Any:
        self.loads += 1
        if self._error is not None:
            raise self._error
        return self._obj


def install_entry_points(monkeypatch: pytest.MonkeyPatch, *eps: FakeEntryPoint) -> None:
    table = {ep.name: ep for ep in eps}
    monkeypatch.setattr(PluginManager, "entry_points", staticmethod(lambda: dict(table)))


def write_config(home: Path, enabled: list[str] = (), disabled: list[str] = ()) -> None:  # type: ignore[assignment]
    (home / "config.json").write_text(
        json.dumps({"plugins": {"enabled": list(enabled), "disabled": list(disabled)}}),
        encoding="utf-8")


def tagging_plugin(tag: str) -> Any:
    """register(ctx) adding an llm_execution layer that appends ``tag`` to request['path']."""

    def register(ctx: Any) -> None:
        def tag_layer(**kw: Any) -> Any:
            req = kw["request"]
            return kw["next_call"]({**req, "path": [*req["path"], tag]})

        named(tag_layer, f"tag_{tag}")
        ctx.register_middleware("llm_execution", tag_layer)

    return register


def path_of_call(p: Pipeline, mode: str = "sync") -> list[str]:
    seen: list[list[str]] = []

    def base(req: Any) -> str:
        seen.append(list(req["path"]))
        return "ok"

    run_call(p, mode, "llm", {"path": []}, base)
    return seen[0]


@pytest.fixture
def no_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    install_entry_points(monkeypatch)


# -------------------------------------------------------------- validation


BAD_REGISTRATIONS = {
    "unknown_kind": lambda ctx: ctx.register_middleware("llm_reqest", lambda **kw: None),
    "non_callable_middleware": lambda ctx: ctx.register_middleware("llm_request", "nope"),
    "non_callable_hook": lambda ctx: ctx.register_hook("post_tool_call", 42),
}


@pytest.mark.parametrize("case", sorted(BAD_REGISTRATIONS))
def test_bad_registration_raises_value_error_naming_plugin(
    case: str, tmp_path: Path, no_entry_points: None
) -> None:
    p = Pipeline()
    pm = PluginManager(p, home=tmp_path)

    def register(ctx: Any) -> None:
        ctx.register_middleware("llm_request", lambda **kw: None)  # staged, must be discarded
        BAD_REGISTRATIONS[case](ctx)

    with pytest.raises(ValueError, match="my-bad-plugin"):
        pm.add_plugin("my-bad-plugin", register)
    assert p.registry.all_layers() == []


@pytest.mark.parametrize("name", ["pre_api_requst", "PRE_TOOL_CALL", "", None, 3, "llm_request"])
def test_unknown_hook_name_rejects_that_registration_and_keeps_the_others(
    name: Any, tmp_path: Path, no_entry_points: None, caplog: pytest.LogCaptureFixture
) -> None:
    p = Pipeline()
    pm = PluginManager(p, home=tmp_path)
    seen: list[str] = []

    def register(ctx: Any) -> None:
        ctx.register_middleware("tool_execution", lambda **kw: ("mw", kw["next_call"]()))
        ctx.register_hook(name, lambda **kw: seen.append("unknown"))
        ctx.register_hook("post_tool_call", lambda **kw: seen.append("post"))

    for load in ("add_plugin", "reload"):
        seen.clear()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="otelmw"):
            st = pm.add_plugin("typo-plugin", register) if load == "add_plugin" else \
                pm.reload()["typo-plugin"]
        assert st.loaded and st.error is None, load
        assert st.middleware == ["tool_execution:typo-plugin.<lambda>"]
        assert st.hooks == ["post_tool_call:typo-plugin.<lambda>"]
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, warnings
        assert st.rejected == warnings
        assert "plugin 'typo-plugin'" in warnings[0] and repr(name) in warnings[0]
        assert all(h in warnings[0] for h in otelmw.HOOK_NAMES)
        suggestion = {"pre_api_requst": "pre_api_request", "PRE_TOOL_CALL": "pre_tool_call"}
        if name in suggestion:
            assert f"did you mean {suggestion[name]!r}?" in warnings[0]
        elif not isinstance(name, str) or not name:
            assert "did you mean" not in warnings[0]
        assert p.run_tool("t", {}, lambda a: "base") == ("mw", "base")
        assert seen == ["post"]


@pytest.mark.parametrize("case", ["unknown_kind", "unknown_hook", "non_callable"])
def test_registry_direct_registration_validates(case: str) -> None:
    p = Pipeline()
    with pytest.raises(ValueError, match="direct-plug"):
        if case == "unknown_kind":
            p.registry.add_middleware("tool_exec", lambda **kw: None, plugin="direct-plug")
        elif case == "unknown_hook":
            p.registry.add_hook("on_tool", lambda **kw: None, plugin="direct-plug")
        else:
            p.registry.add_middleware("tool_execution", None, plugin="direct-plug")  # type: ignore[arg-type]
    assert p.registry.all_layers() == []


def test_add_plugin_with_non_callable_register_raises(tmp_path: Path) -> None:
    pm = PluginManager(Pipeline(), home=tmp_path)
    with pytest.raises(ValueError, match="not-callable-plugin"):
        pm.add_plugin("not-callable-plugin", "register")  # type: ignore[arg-type]


# ------------------------------------------------------------- entry points


@pytest.mark.parametrize("mode", MODES)
def test_entry_point_failures_are_reported_and_others_still_load(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    module = types.ModuleType("good_module_plugin")
    module.register = tagging_plugin("mod")  # type: ignore[attr-defined]

    def raising_register(ctx: Any) -> None:
        tagging_plugin("partial")(ctx)  # staged, then discarded
        raise RuntimeError("register blew up")

    install_entry_points(
        monkeypatch,
        FakeEntryPoint("a_good_fn", tagging_plugin("fn")),
        FakeEntryPoint("b_broken_import", error=ImportError("No module named 'missing_dep'")),
        FakeEntryPoint("c_broken_register", raising_register),
        FakeEntryPoint("d_good_module", module),
    )
    write_config(tmp_path, enabled=["a_good_fn", "b_broken_import", "c_broken_register",
                                    "d_good_module"])
    p = Pipeline()
    pm = PluginManager(p, home=tmp_path)
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        status = pm.reload()

    assert status["a_good_fn"].loaded and status["a_good_fn"].error is None
    assert status["d_good_module"].loaded and status["d_good_module"].error is None
    assert not status["b_broken_import"].loaded
    assert "ImportError" in (status["b_broken_import"].error or "")
    assert "missing_dep" in (status["b_broken_import"].error or "")
    assert not status["c_broken_register"].loaded
    assert "register blew up" in (status["c_broken_register"].error or "")
    warned = " | ".join(r.getMessage() for r in caplog.records
                        if r.name == "otelmw" and r.levelno == logging.WARNING)
    assert "b_broken_import" in warned and "c_broken_register" in warned
    assert path_of_call(p, mode) == ["fn", "mod"]


@pytest.mark.parametrize("mode", MODES)
def test_entry_point_plugins_load_only_when_enabled(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on = FakeEntryPoint("on", tagging_plugin("on"))
    off = FakeEntryPoint("off", tagging_plugin("off"))
    install_entry_points(monkeypatch, on, off)
    write_config(tmp_path, enabled=["on"])
    p = Pipeline()
    status = PluginManager(p, home=tmp_path).reload()
    assert status["on"].loaded and status["on"].enabled
    assert not status["off"].loaded and not status["off"].enabled
    assert off.loads == 0
    assert path_of_call(p, mode) == ["on"]


def test_no_config_means_no_entry_point_plugins(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ep = FakeEntryPoint("x", tagging_plugin("x"))
    install_entry_points(monkeypatch, ep)
    p = Pipeline()
    status = PluginManager(p, home=tmp_path).reload()
    assert not status["x"].loaded and ep.loads == 0
    assert p.registry.all_layers() == []


def test_enabled_but_not_installed_is_reported(tmp_path: Path, no_entry_points: None) -> None:
    write_config(tmp_path, enabled=["ghost"])
    status = PluginManager(Pipeline(), home=tmp_path).reload()
    assert status["ghost"].error == "enabled but not installed"
    assert not status["ghost"].loaded


@pytest.mark.parametrize("mode", MODES)
def test_reload_rereads_config_and_disable_removes_middleware(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_entry_points(monkeypatch, FakeEntryPoint("ep", tagging_plugin("ep")))
    p = Pipeline()
    pm = PluginManager(p, home=tmp_path)
    pm.add_plugin("prog", tagging_plugin("prog"))
    assert path_of_call(p, mode) == ["prog"]

    pm.set_enabled("ep", True)
    pm.reload()
    assert path_of_call(p, mode) == ["ep", "prog"]

    pm.set_enabled("ep", False)
    pm.reload()
    assert path_of_call(p, mode) == ["prog"]

    pm.set_enabled("prog", False)
    pm.reload()
    assert path_of_call(p, mode) == []
    assert p.registry.all_layers() == []

    pm.set_enabled("prog", True)
    pm.set_enabled("ep", True)
    pm.reload()
    assert path_of_call(p, mode) == ["ep", "prog"]


def test_programmatic_plugin_in_disabled_list_is_not_loaded(
    tmp_path: Path, no_entry_points: None
) -> None:
    write_config(tmp_path, disabled=["prog"])
    p = Pipeline()
    st = PluginManager(p, home=tmp_path).add_plugin("prog", tagging_plugin("prog"))
    assert not st.loaded and not st.enabled
    assert path_of_call(p) == []


def test_re_adding_a_plugin_replaces_its_registrations(tmp_path: Path,
                                                        no_entry_points: None) -> None:
    p = Pipeline()
    pm = PluginManager(p, home=tmp_path)
    pm.add_plugin("prog", tagging_plugin("v1"))
    pm.add_plugin("prog", tagging_plugin("v2"))
    assert path_of_call(p) == ["v2"]
    pm.remove_plugin("prog")
    assert path_of_call(p) == []


# ------------------------------------------------------------------------- CLI


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """OTELMW_HOME=tmp_path and a private pipeline so `plugins list` (which reloads)
    does not touch the process-wide default pipeline."""
    monkeypatch.setenv("OTELMW_HOME", str(tmp_path))
    monkeypatch.setattr(plugins_mod, "get_pipeline", lambda: Pipeline())
    install_entry_points(
        monkeypatch,
        FakeEntryPoint("alpha", tagging_plugin("alpha")),
        FakeEntryPoint("beta", error=ImportError("beta is broken")),
    )
    return tmp_path


def _config(home: Path) -> dict[str, Any]:
    return json.loads((home / "config.json").read_text(encoding="utf-8"))


def test_cli_enable_disable_and_list(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["plugins", "list"]) == 0
    out = capsys.readouterr().out
    assert "alpha" in out and "disabled" in out.splitlines()[0]

    assert cli_main(["plugins", "enable", "alpha"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("enabled alpha") and str(cli_env / "config.json") in out
    assert _config(cli_env)["plugins"] == {"enabled": ["alpha"], "disabled": []}

    assert cli_main(["plugins", "enable", "beta"]) == 0
    capsys.readouterr()
    assert cli_main(["plugins", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    alpha = next(line for line in lines if line.startswith("alpha"))
    beta = next(line for line in lines if line.startswith("beta"))
    assert "entry_point" in alpha and "loaded" in alpha
    assert "llm_execution:alpha.tag_alpha" in lines[lines.index(alpha) + 1]
    assert "failed" in beta and "beta is broken" in beta

    assert cli_main(["plugins", "disable", "alpha"]) == 0
    assert capsys.readouterr().out.startswith("disabled alpha")
    assert _config(cli_env)["plugins"] == {"enabled": ["beta"], "disabled": ["alpha"]}
    assert cli_main(["plugins", "list"]) == 0
    alpha = next(line for line in capsys.readouterr().out.splitlines()
                 if line.startswith("alpha"))
    assert alpha.split()[-1] == "disabled"


def test_cli_enable_without_name_is_a_usage_error(cli_env: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli_main(["plugins", "enable"])
    assert info.value.code == 2
    assert "the following arguments are required: NAME" in capsys.readouterr().err


def test_cli_unreadable_config_is_a_clear_error(cli_env: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (cli_env / "config.json").write_text("{not json", encoding="utf-8")
    assert cli_main(["plugins", "list"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("otelmw: error:") and "config.json" in err


def test_cli_plugins_list_in_a_real_subprocess(tmp_path: Path) -> None:
    write_config(tmp_path, enabled=["ghost-plugin"])
    env = {**os.environ, "OTELMW_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "otelmw.cli", "plugins", "list"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    ghost = [line for line in proc.stdout.splitlines() if line.startswith("ghost-plugin")]
    assert len(ghost) == 1
    assert "failed" in ghost[0] and "enabled but not installed" in ghost[0]


def _installed_plugin_site(root: Path) -> Path:
    """A directory holding a really installed plugin distribution, for PYTHONPATH."""
    return install_distribution(root / "site", "otelmw-sample-guard",
                                {PLUGINS: {"sample_guard": "sample_guard_mod:register"}},
                                {"sample_guard_mod.py": "def register(ctx):\n    pass\n"})


def test_cli_enable_of_a_plugin_that_is_not_installed_is_an_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    site = _installed_plugin_site(tmp_path)
    env = {**os.environ, "OTELMW_HOME": str(home),
           "PYTHONPATH": os.pathsep.join(x for x in (str(site), os.environ.get("PYTHONPATH"))
                                         if x)}

    def otelmw(*args: str) -> subprocess.CompletedProcess[str]:
        return run_otelmw(*args, env=env, cwd=tmp_path)

    typo = otelmw("plugins", "enable", "sample_gaurd")
    assert typo.returncode == 2
    assert typo.stderr.startswith("otelmw: error: no installed plugin 'sample_gaurd'")
    assert "installed: sample_guard;" in typo.stderr
    assert "did you mean 'sample_guard'?" in typo.stderr and "--force" in typo.stderr
    assert "Traceback" not in typo.stderr
    assert not (home / "config.json").exists()  # nothing recorded

    assert otelmw("plugins", "enable", "sample_guard").returncode == 0
    forced = otelmw("plugins", "enable", "not_yet_installed", "--force")
    assert forced.returncode == 0, forced.stderr
    assert _config(home)["plugins"]["enabled"] == ["not_yet_installed", "sample_guard"]
    listed = otelmw("plugins", "list")
    assert re.search(r"^sample_guard\s+entry_point\s+loaded", listed.stdout, re.M), listed.stdout


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", OPS)
def test_a_call_keeps_the_registrations_it_started_with_across_a_reload(
        mode: str, op: str) -> None:
    """A plugin removed while a call is running (another thread reloading) does not
    vanish from that call's later stages; the next call no longer sees it."""
    pipe = Pipeline()
    seen: list[str] = []
    req, exe = (("llm_request", "llm_execution") if op == "llm"
                else ("tool_request", "tool_execution"))

    def remove_wrapper_plugin(**kw: Any) -> None:
        seen.append("request")
        pipe.registry.remove_plugin("wrapper")

    def wrapper(**kw: Any) -> Any:
        seen.append("wrapper")
        return kw["next_call"]()

    pipe.registry.add_middleware(req, remove_wrapper_plugin, "remover")
    pipe.registry.add_middleware(exe, wrapper, "wrapper")
    before = pipe.registry.tables()

    def run() -> Any:
        return run_call(pipe, mode, op, {"model": "m"} if op == "llm" else {}, lambda p: "ok")

    assert run() == "ok"
    assert seen == ["request", "wrapper"]
    assert before[0][exe] and not pipe.registry.tables()[0][exe]  # snapshots do not change
    seen.clear()
    assert run() == "ok"
    assert seen == ["request"]
