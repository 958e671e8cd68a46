"""The hosts' own tests give the same outcome per test with and without ``otelmw run``.

A chosen set of each host's own test files, taken from the host's sdist on PyPI at the
installed version (``pip download --no-binary :all:``, cached under
``.cache/host-suites/``), runs twice, each file in an interpreter of its own: once as
it is, once under ``otelmw run`` (every ``otelmw_*`` instrumentor on, telemetry to a
local store). Only the test files are unpacked (into a temporary directory): they
test the installed host package, as otelmw instruments it. The outcome of every test
id must be the same in both runs, and most tests must pass.

What runs: Hermes Agent's tool dispatch and middleware tests (``test_model_tools*.py``),
its ``transform_llm_output``/``transform_tool_result`` hook tests and plugin helper tests;
praisonaiagents' runtime middleware, parallel tools, tool timeout and schema tests, its
plugin system, plugin registry and gate tests, and its guardrail tests; Strands Agents'
middleware tests (model, tool and agent-stream stages, interrupts), hook registry and
direct tool-call tests, with the two fixture modules they import; google-genai's
automatic function calling and chat tests, which it ships inside its package and which
run there; CrewAI's LLM and tool hook tests, its hook interception conformance tests and
its tool and tool-usage tests (``SUITES``). CrewAI's own telemetry is off in both runs
(``CREWAI_DISABLE_TELEMETRY``): it would call telemetry.crewai.com.

The sdists do not ship every test of the hosts' repositories: hermes-agent 0.19.0's
lacks ``tests/hermes_cli/`` (``test_plugins.py``) and ``tests/run_agent/``,
praisonaiagents 1.7.17's lacks ``tests/unit/`` (``unit/hooks/``). strands-agents 1.62.0's
root ``tests/conftest.py`` needs ``moto`` (not installed), so the files that use its
fixtures (its tool executor, event loop and agent hook tests) are not chosen; Strands'
tests need ``pytest-asyncio``, pinned in the ``strands`` environment. Those are not taken
from the repositories either: the suite's CI reaches package registries only, and the
project commits no third-party code. The hook and middleware behaviour they cover is
pinned by ``test_host_hermes_contract.py`` (Hermes with and without otelmw on the same
turns: requests, answers, callback inputs, warnings) and ``test_host_praisonai.py``
(``has_hooks`` answers what PraisonAI registered). llama-index-core's sdist (0.14.25)
ships no tests at all: ``test_host_llamaindex.py`` runs the same LlamaIndex turns with and
without otelmw instead (what the provider received, the answers, the streamed events, and
what LlamaIndex's own event and span handlers recorded).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from _support.components import unavailable
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "host-suites"
TIMEOUT = 600


@dataclass(frozen=True)
class HostSuite:
    """One host's own tests: its distribution and the test files chosen from its sdist."""

    host: str  # the ``host`` marker's name
    distribution: str
    files: tuple[str, ...]  # paths inside the sdist, under its top directory
    least_passed: int  # fewer passing tests than this: the run is broken, not equal
    support: tuple[str, ...] = ()  # unpacked beside them, not run: what they import
    # the same, where the sdist has them (what the files import moved between releases:
    # a release without one does not import it)
    support_if_shipped: tuple[str, ...] = ()
    # "installed": the host ships these tests inside its package (paths in the installed
    # distribution), as modules of it with relative imports: they run in place
    source: str = "sdist"
    # the files in one interpreter per run (their tests share no state across files)
    # instead of one interpreter per file
    together: bool = False
    # "installed": a release known to ship the files; an older one without them is
    # skipped (google-genai 1.32.0, the floor in hosts-oldest, ships no tests)
    shipped_in: str = ""
    # the releases these files are chosen from (a version specifier): another release
    # is skipped, another entry for the same host covers it (MCP 1.x and 2.x)
    releases: str = ""
    # pytest options the host's own configuration sets for these tests (its pyproject)
    options: tuple[str, ...] = ()


SUITES = {
    "hermes": HostSuite("hermes", "hermes-agent", (
        "tests/test_model_tools.py",
        "tests/test_model_tools_async_bridge.py",
        "tests/test_transform_llm_output_hook.py",
        "tests/test_transform_tool_result_hook.py",
        "tests/test_plugin_utils.py",
        "tests/test_plugin_skills.py",
    ), 85),
    "praisonai": HostSuite("praisonai", "praisonaiagents", (
        "tests/test_runtime_middleware.py",
        "tests/test_parallel_tools.py",
        "tests/test_tool_timeout.py",
        "tests/test_tool_schema_parity.py",
        "tests/test_deferred_progress_tools.py",
        "tests/test_planning_tools.py",
        "tests/test_plugin_system.py",
        "tests/test_plugin_registry_and_gate.py",
        "tests/test_guardrail_blocked_message.py",
    ), 145),
    # google-genai's automatic function calling and chat tests (the SDK's mocks of its
    # API client, no network). Those that need recorded replays or Pillow are not chosen,
    # nor those that load pytest-asyncio as a plugin (``pytest_plugins``: chats'
    # continuation-token and history tests); its few ``@pytest.mark.asyncio`` tests run
    # under the pytest-asyncio of the ``current`` environment (the OpenAI Agents SDK's
    # tests need it).
    "google-genai": HostSuite("google-genai", "google-genai", tuple(
        f"google/genai/tests/{name}.py" for name in (
            "afc/test_convert_if_exist_pydantic_model",
            "afc/test_convert_number_values_for_function_call_args",
            "afc/test_find_afc_incompatible_tool_indexes",
            "afc/test_future_annotations",
            "afc/test_generate_content_stream_afc",
            "afc/test_get_function_map",
            "afc/test_get_function_response_parts",
            "afc/test_get_max_remote_calls_for_afc",
            "afc/test_get_usage_header",
            "afc/test_invoke_function_from_dict_args",
            "afc/test_raise_error_for_afc_incompatible_config",
            "afc/test_should_append_afc_history",
            "afc/test_should_disable_afc",
            "chats/test_validate_response",
        )), 120, source="installed", together=True, shipped_in="3.6.1"),
    "strands": HostSuite("strands", "strands-agents", (
        "tests/strands/middleware/test_agent_middleware.py",
        "tests/strands/middleware/test_agent_stream_middleware.py",
        "tests/strands/middleware/test_execute_tool_middleware.py",
        "tests/strands/middleware/test_middleware_interrupts.py",
        "tests/strands/middleware/test_stages.py",
        "tests/strands/hooks/test_registry.py",
        "tests/strands/tools/test_caller.py",
    ), 180, support=(
        "tests/__init__.py",
        "tests/strands/__init__.py",
        "tests/fixtures/mock_hook_provider.py",
        "tests/fixtures/mocked_model_provider.py",
        "tests/strands/middleware/__init__.py",
        "tests/strands/hooks/__init__.py",
        "tests/strands/tools/__init__.py",
    )),
    # LangChain's create_agent middleware tests (wrap_model_call, wrap_tool_call, sync
    # and async wrappers, composition, overrides, the tools a request names and the
    # unknown-tool check, dynamic tools), its tool validation,
    # system message and response format tests, on its fake tool-calling chat model
    # (async tests: its configuration's asyncio_mode=auto). Not chosen: the files
    # needing syrupy or the unit tests' conftest (blockbuster, vcr, langchain-tests).
    "langchain": HostSuite("langchain", "langchain", tuple(
        f"tests/unit_tests/agents/{name}.py" for name in (
            "middleware/core/test_composition",
            "middleware/core/test_overrides",
            "middleware/core/test_wrap_model_call",
            "middleware/core/test_wrap_tool_call",
            "middleware/core/test_sync_async_wrappers",
            "middleware/core/test_tools",
            "middleware/core/test_dynamic_tools",
            "test_create_agent_tool_validation",
            "test_system_message",
            "test_response_format",
        )), 180, support=(
        "tests/__init__.py",
        "tests/unit_tests/__init__.py",
        "tests/unit_tests/agents/__init__.py",
        "tests/unit_tests/agents/model.py",
        "tests/unit_tests/agents/middleware/__init__.py",
        "tests/unit_tests/agents/middleware/core/__init__.py",
    ), together=True, options=("-o", "asyncio_mode=auto")),
    # langchain-core's chat model tests (BaseChatModel invoke/stream/batch, sync and
    # async, its cache), its tool tests (BaseTool run/arun, schemas, errors) and its
    # callback tests: the model and tool seams otelmw_langchain wraps. Its asyncio tests
    # are unmarked (its configuration's asyncio_mode=auto, pytest-asyncio). Not its
    # conftest (blockbuster, pytest-mock). Run where the langchain host's tests run.
    "langchain-core": HostSuite("langchain", "langchain-core", tuple(
        f"tests/unit_tests/{name}.py" for name in (
            "language_models/chat_models/test_base",
            "language_models/chat_models/test_cache",
            "test_tools",
            "callbacks/test_handle_event",
            "callbacks/test_usage_callback",
            "fake/test_fake_chat_model",
        )), 230, support=(
        "tests/__init__.py",
        "tests/unit_tests/__init__.py",
        "tests/unit_tests/stubs.py",
        "tests/unit_tests/pydantic_utils.py",
        "tests/unit_tests/fake/__init__.py",
        "tests/unit_tests/fake/callbacks.py",
        "tests/unit_tests/language_models/__init__.py",
        "tests/unit_tests/language_models/chat_models/__init__.py",
        "tests/unit_tests/callbacks/__init__.py",
    ), together=True, options=("-o", "asyncio_mode=auto")),
    # LangGraph's graph callback, tool stream, message stream (a fake chat model in the
    # nodes), v3 event stream, messages state and runnable tests: graph runs through
    # Pregel.stream, chat model and tool calls inside them. Not its conftest (it imports
    # redis, the sqlite and postgres checkpointers and pytest-mock): no file chosen uses
    # its fixtures.
    "langgraph": HostSuite("langgraph", "langgraph", (
        "tests/test_graph_callbacks.py",
        "tests/test_tool_stream_handler.py",
        "tests/test_stream_messages_transformer.py",
        "tests/test_stream_events_v3.py",
        "tests/test_messages_state.py",
        "tests/test_runnable.py",
    ), 130, support=(
        "tests/__init__.py",
        "tests/any_str.py",
        "tests/fake_chat.py",
        "tests/messages.py",
    ), together=True),
    # The MCP SDK's client callback tests (sampling, logging, roots, elicitation, output
    # schema validation: a client calling a server's tools in memory) and its server
    # tool manager, tool annotation and validation tests, for each major line (their
    # files differ). Not chosen: those needing inline-snapshot, dirty-equals or logfire
    # (the root conftest's span capture), nor the conftest fixtures.
    "mcp": HostSuite("mcp", "mcp", tuple(f"tests/{name}.py" for name in (
        "client/test_sampling_callback",
        "client/test_logging_callback",
        "client/test_list_roots_callback",
        "client/test_output_schema_validation",
        "server/mcpserver/test_tool_manager",
        "server/mcpserver/test_elicitation",
        "server/mcpserver/test_url_elicitation",
        "server/test_validation",
        "server/test_lowlevel_tool_annotations",
    )), 85, support=(
        "tests/__init__.py",
        "tests/client/__init__.py",
        "tests/server/__init__.py",
        "tests/server/mcpserver/__init__.py",
    ), together=True, releases=">=2"),
    "mcp1": HostSuite("mcp", "mcp", tuple(f"tests/{name}.py" for name in (
        "client/test_sampling_callback",
        "client/test_logging_callback",
        "client/test_list_roots_callback",
        "client/test_output_schema_validation",
        "server/fastmcp/test_tool_manager",
        "server/fastmcp/test_elicitation",
        "server/fastmcp/test_url_elicitation",
        "server/test_validation",
        "server/test_lowlevel_tool_annotations",
        "server/test_lowlevel_input_validation",
        "server/test_lowlevel_output_validation",
    )), 100, support=(
        "tests/__init__.py",
        "tests/client/__init__.py",
        "tests/server/__init__.py",
        "tests/server/fastmcp/__init__.py",
    ), together=True, releases="<2"),
    # The OpenAI Agents SDK's runner tests (agent runs on its fake model: model calls,
    # function tools, handoffs, sessions, streaming), its agent, run and global hook
    # tests, tool use behaviour, function tool and tool guardrail tests, with its
    # conftest (a fake API key, real model clients disabled, its tracing processor).
    # Most are asyncio tests: pytest-asyncio is pinned in the environments running them.
    "openai-agents": HostSuite("openai-agents", "openai-agents", tuple(
        f"tests/{name}.py" for name in (
            "test_agent_runner",
            "test_agent_hooks",
            "test_agent_llm_hooks",
            "test_run_hooks",
            "test_global_hooks",
            "test_tool_use_behavior",
            "test_function_tool",
            "test_tool_guardrails",
        )), 330, support=(
        "tests/__init__.py",
        "tests/conftest.py",
        "tests/testing_processor.py",
        "tests/test_responses.py",
        "tests/utils/factories.py",
        "tests/utils/hitl.py",
        "tests/utils/simple_session.py",
    ), support_if_shipped=(
        "tests/fake_model.py",  # 0.20
        "tests/model_test_helpers.py",  # 0.24
    ), together=True),
    "crewai": HostSuite("crewai", "crewai", (
        "tests/hooks/test_interception_conformance.py",
        "tests/hooks/test_llm_hooks.py",
        "tests/hooks/test_tool_hooks.py",
        "tests/tools/test_base_tool.py",
        "tests/tools/test_tool_usage.py",
    ), 150),
}


def release(suite: HostSuite) -> str:
    """The installed version of the host's distribution."""
    try:
        return metadata.version(suite.distribution)
    except metadata.PackageNotFoundError:
        unavailable(f"{suite.distribution} (installed)")


def sdist(suite: HostSuite) -> Path:
    """The host's sdist at its installed version, downloaded once into the cache."""
    version = release(suite)
    stem = f"{suite.distribution.replace('-', '_')}-{version}"
    path = CACHE / f"{stem}.tar.gz"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        got = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "--disable-pip-version-check", "-d", str(CACHE),
             f"{suite.distribution}=={version}"],
            capture_output=True, text=True, timeout=TIMEOUT)
        if got.returncode != 0 or not path.exists():
            unavailable(f"the sdist of {suite.distribution} {version} ({got.stderr[-300:]})")
    return path


def unpack_tests(archive: Path, suite: HostSuite, into: Path) -> list[Path]:
    """The chosen test files and the modules they import (nothing else of the sdist)
    under ``into``; returns the test files."""
    with tarfile.open(archive) as tar:
        top = tar.getnames()[0].split("/", 1)[0]
        shipped = set(tar.getnames())
        optional = [name for name in suite.support_if_shipped if f"{top}/{name}" in shipped]
        for name in (*suite.support, *optional, *suite.files):
            member = tar.getmember(f"{top}/{name}")
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None, name
            target.write_bytes(source.read())
    return [into / name for name in suite.files]


def installed_tests(suite: HostSuite) -> list[Path]:
    """The chosen test files where the installed distribution has them."""
    try:
        distribution = metadata.distribution(suite.distribution)
    except metadata.PackageNotFoundError:
        unavailable(f"{suite.distribution} (installed)")
    found = [Path(str(distribution.locate_file(name))) for name in suite.files]
    missing = [str(path) for path in found if not path.is_file()]
    if (len(missing) == len(found) and suite.shipped_in
            and Version(distribution.version) < Version(suite.shipped_in)):
        pytest.skip(f"{suite.distribution} {distribution.version} ships none of these tests "
                    f"({suite.shipped_in} does: they run where it is installed)")
    if missing:
        unavailable(f"the tests {suite.distribution} ships: {missing}")
    return found


def site_packages(test_file: Path) -> Path:
    """The import root above an installed test module (its first parent on sys.path)."""
    roots = {Path(p).resolve() for p in sys.path if p}
    for parent in test_file.resolve().parents:
        if parent in roots:
            return parent
    raise AssertionError(f"{test_file} is not under sys.path")


def outcomes(junit: Path) -> dict[str, str]:
    """Each test id of a JUnit XML report and its outcome."""
    found: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = child.tag
        found[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return found


def run_files(test_files: list[Path], workdir: Path, under_otelmw: bool, tag: str,
              in_place: bool = False, options: tuple[str, ...] = ()) -> dict[str, str]:
    """Test files in an interpreter of their own (under ``otelmw run``, or not).
    ``in_place``: a module of the installed host package, imported by its package name
    (``google`` is a namespace package: without the option pytest names the module
    ``genai.tests...`` and imports a second, uninstrumented copy of the SDK)."""
    junit = workdir / f"{test_files[0].stem}-{tag}.xml"
    home = workdir / f"home-{tag}"
    home.mkdir(exist_ok=True)
    pytest_cmd = [sys.executable, "-m", "pytest", *map(str, test_files), "-q", "-p",
                  "no:cacheprovider", "-o", "addopts=", "--junitxml", str(junit),
                  # in place: the rootdir is the files' site-packages, so that their test
                  # ids name their modules (``google/genai/tests/afc/...``)
                  "--rootdir", str(site_packages(test_files[0]) if in_place else workdir),
                  "-p", "no:randomly",
                  *(["-o", "consider_namespace_packages=true"] if in_place else []),
                  *options]
    otelmw = Path(sys.executable).parent / "otelmw"
    command = [str(otelmw), "run", "--", *pytest_cmd] if under_otelmw else pytest_cmd
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "OTELMW_", "HERMES_", "PYTEST_"))}
    env.update(HERMES_HOME=str(home / "hermes"), HOME=str(home),
               OTELMW_HOME=str(home / "otelmw"), OTELMW_DATA_DIR=str(home / "otelmw-data"),
               OTELMW_QUIET="1", OTEL_METRIC_EXPORT_INTERVAL="600000",
               CREWAI_DISABLE_TELEMETRY="true", CREWAI_DISABLE_TRACKING="true")
    proc = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert junit.exists(), f"{' '.join(command)}: exit {proc.returncode}\n{proc.stdout[-2000:]}" \
                           f"\n{proc.stderr[-2000:]}"
    return outcomes(junit)


@pytest.mark.parametrize("host", [pytest.param(name, marks=pytest.mark.host(suite.host))
                                  for name, suite in sorted(SUITES.items())])
def test_host_tests_have_the_same_outcomes_under_otelmw(host: str, tmp_path: Path) -> None:
    suite = SUITES[host]
    if suite.releases:
        version = release(suite)
        if version not in SpecifierSet(suite.releases):
            pytest.skip(f"{suite.distribution} {version}: these files are chosen from its "
                        f"releases {suite.releases} (another entry has its own)")
    in_place = suite.source == "installed"
    files = installed_tests(suite) if in_place else unpack_tests(sdist(suite), suite, tmp_path)
    plain: dict[str, str] = {}
    instrumented: dict[str, str] = {}
    for group in [files] if suite.together else [[test_file] for test_file in files]:
        plain.update(run_files(group, tmp_path, False, "plain", in_place, suite.options))
        instrumented.update(run_files(group, tmp_path, True, "otelmw", in_place,
                                      suite.options))
    differ = {test_id: (plain.get(test_id), instrumented.get(test_id))
              for test_id in plain.keys() | instrumented.keys()
              if plain.get(test_id) != instrumented.get(test_id)}
    assert not differ, f"outcomes (without, with otelmw) that differ: {differ}"
    passed = sum(outcome == "passed" for outcome in plain.values())
    assert passed >= suite.least_passed, plain
    print(f"{host}: {len(plain)} tests in {len(files)} files, {passed} passed, "
          "the same outcome each with otelmw run")

