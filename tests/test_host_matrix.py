"""The host matrix: declared host ranges are what the matrix runs, each matrix
environment runs what it says, the ``host`` marker selects as documented, and
``scripts/test-all.sh`` respects the machine (nothing stopped or killed, Compose v2
accepted, no root: a list of Debian packages instead of a half-way failure)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from importlib import import_module
from importlib.metadata import version
from pathlib import Path

import pytest
from _support.components import HOST_MODULES, env_hosts
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
ENV_FILES = sorted((ROOT / "scripts" / "envs").glob("*.txt"))
# host -> the package whose releases its range declares (the langchain host, a
# create_agent program, and the langgraph host, LangGraph without langchain, are both
# otelmw_langchain's, whose range is langchain-core's)
PACKAGES = {"openai": "openai", "anthropic": "anthropic", "hermes": "hermes-agent",
            "praisonai": "praisonaiagents", "litellm": "litellm",
            "langchain": "langchain-core", "langgraph": "langchain-core",
            "mcp": "mcp", "pydantic-ai": "pydantic-ai-slim", "openai-agents": "openai-agents",
            "google-genai": "google-genai", "strands": "strands-agents",
            "crewai": "crewai", "google-adk": "google-adk", "llamaindex": "llama-index-core"}
# host -> packages pinned beside it in an environment that provides it (the parts of the
# host a user installs with it)
COMPANIONS = {"langchain": {"langchain", "langchain-openai", "langgraph"},
              "langgraph": {"langchain-openai", "langgraph"},
              "llamaindex": {"llama-index-llms-openai"}}
INSTRUMENTORS = {"openai": "otelmw.instrumentation.openai:OpenAIInstrumentor",
                 "anthropic": "otelmw.instrumentation.anthropic:AnthropicInstrumentor",
                 "hermes": "otelmw.instrumentation.hermes:HermesInstrumentor",
                 "praisonai": "otelmw.instrumentation.praisonai:PraisonAIInstrumentor",
                 "litellm": "otelmw.instrumentation.litellm:LiteLLMInstrumentor",
                 "langchain": "otelmw.instrumentation.langchain:LangChainInstrumentor",
                 "mcp": "otelmw.instrumentation.mcp:MCPInstrumentor",
                 "pydantic-ai": "otelmw.instrumentation.pydantic_ai:PydanticAIInstrumentor",
                 "openai-agents":
                     "otelmw.instrumentation.openai_agents:OpenAIAgentsInstrumentor",
                 "google-genai": "otelmw.instrumentation.google_genai:GoogleGenAIInstrumentor",
                 "strands": "otelmw.instrumentation.strands:StrandsInstrumentor",
                 "crewai": "otelmw.instrumentation.crewai:CrewAIInstrumentor",
                 "google-adk": "otelmw.instrumentation.google_adk:GoogleADKInstrumentor",
                 "llamaindex": "otelmw.instrumentation.llamaindex:LlamaIndexInstrumentor"}


def env_pins(path: Path) -> dict[str, Version]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", f"{path.name}: {line!r} must pin one release"
            pins[req.name] = Version(spec.version)
    return pins


def header(path: Path, field: str) -> set[str]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"# {field}:"):
            return set(line.split(":", 1)[1].split())
    return set()


def runs_tests_of(path: Path, host: str) -> bool:
    """Whether the environment runs ``host``'s tests (an ``# only:`` line names the
    hosts whose tests run there; without one, every provided host's)."""
    only = header(path, "only")
    return host in header(path, "hosts") and (not only or host in only)


def releases_tested(package: str, hosts: set[str] | None = None) -> list[Version]:
    """The releases of ``package`` pinned where the tests of one of ``hosts`` (default:
    the hosts whose range is ``package``'s) run (a release only installed beside another
    host's tests is not one)."""
    hosts = hosts or {h for h, p in PACKAGES.items() if p == package}
    return sorted({v for f in ENV_FILES if any(runs_tests_of(f, h) for h in hosts)
                   for p, v in env_pins(f).items() if p == package})


def next_major(v: Version) -> Version:
    """The next release line that breaks compatibility (0.x: the next minor)."""
    return Version(f"{v.major + 1}") if v.major else Version(f"0.{v.minor + 1}")


def bounds(requirement: str) -> tuple[Version, Version]:
    specs = {s.operator: Version(s.version) for s in Requirement(requirement).specifier}
    assert set(specs) == {">=", "<"}, f"{requirement!r}: expected exactly >= and <"
    return specs[">="], specs["<"]


def test_every_host_is_tested_in_some_environment() -> None:
    assert ENV_FILES, "no matrix environment in scripts/envs"
    for host, package in PACKAGES.items():
        assert releases_tested(package), f"{package} is pinned in no matrix environment"
        assert any(host in header(f, "hosts") for f in ENV_FILES), host
    for f in ENV_FILES:  # an env provides what it installs, and only that
        provided = header(f, "hosts")
        assert provided <= HOST_MODULES.keys(), f.name
        # "# also:" names a dependency pinned because a pinned host release does not work
        # with its newest release (the env file says why); never a host package.
        also = header(f, "also")
        assert not also & (set(PACKAGES.values()) | {c for cs in COMPANIONS.values()
                                                      for c in cs}), f.name
        assert {p for h in provided for p in {PACKAGES[h], *COMPANIONS.get(h, ())}} | also \
            == set(env_pins(f)), f.name
        assert header(f, "only") <= provided, f.name


@pytest.mark.parametrize("host", sorted(INSTRUMENTORS))
def test_declared_ranges_are_exactly_what_the_matrix_runs(host: str) -> None:
    """Lower bound: the oldest release tested; upper bound: the next untested major —
    in the pyproject extra and in the instrumentor's ``instrumentation_dependencies``."""
    package = PACKAGES[host]
    tested = releases_tested(package)
    expected = (tested[0], next_major(tested[-1]))
    with (ROOT / "pyproject.toml").open("rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    (extra,) = extras[host]
    assert Requirement(extra).name == package
    assert bounds(extra) == expected, f"pyproject extra {host!r}: {extra!r}"
    module, _, cls = INSTRUMENTORS[host].partition(":")
    (dep,) = getattr(import_module(module), cls)().instrumentation_dependencies()
    assert Requirement(dep).name == package
    assert bounds(dep) == expected, f"{cls}.dependencies: {dep!r}"


def test_the_langchain_parts_ranges_are_what_the_matrix_runs() -> None:
    """otelmw_langchain wraps ``create_agent`` (``langchain``) and the graph turn
    (``langgraph``) only in those packages' ranges: the releases its hosts' tests run."""
    from otelmw.instrumentation.langchain.instrumentor import PART_REQUIREMENTS

    for requirement in PART_REQUIREMENTS:
        package = Requirement(requirement).name
        tested = releases_tested(package, {"langchain", "langgraph"})
        assert tested, f"{package} is pinned in no environment running the langchain tests"
        assert bounds(requirement) == (tested[0], next_major(tested[-1])), requirement


def test_readme_table_lists_the_tested_releases() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Host instrumentors", 1)[1].split("\n\n", 2)[1]
    for package in PACKAGES.values():
        row = next((r for r in table.splitlines() if f"`{package}`" in r), None)
        assert row is not None, f"README host table has no row for {package}"
        for v in releases_tested(package):
            assert str(v) in row, f"README row of {package} does not name tested {v}"


@pytest.mark.every_env
def test_this_environment_runs_the_releases_it_declares() -> None:
    """Under ``scripts/test-all.sh``: each host the environment provides is installed
    at exactly the release its env file pins."""
    name = os.environ.get("OTELMW_TEST_ENV")
    if not name:
        pytest.skip("not run by scripts/test-all.sh (no OTELMW_TEST_ENV)")
    path = ROOT / "scripts" / "envs" / f"{name}.txt"
    assert env_hosts("OTELMW_TEST_HOSTS") == frozenset(header(path, "hosts"))
    for package, pinned in env_pins(path).items():
        assert Version(version(package)) == pinned, package
    assert sys.prefix != sys.base_prefix, "matrix environments are virtual environments"


# ----------------------------------------------------------- marker selection
SAMPLE = '''
import pytest

def test_plain():
    pass

@pytest.mark.host("openai")
def test_needs_openai():
    pass

@pytest.mark.host("praisonai")
def test_needs_praisonai():
    pass

@pytest.mark.every_env
def test_everywhere():
    pass
'''

CONFTEST = '''
import importlib.util, sys
sys.path.insert(0, {tests!r})
from _support import components
{missing}
spec = importlib.util.spec_from_file_location("matrix_conftest", {conftest!r})
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
pytest_collection_modifyitems = mod.pytest_collection_modifyitems
pytest_runtest_setup = mod.pytest_runtest_setup
'''


def run_sample(tmp_path: Path, *, missing: str = "",
               **env: str) -> subprocess.CompletedProcess[str]:
    """pytest in a subprocess over SAMPLE with the suite's real selection hooks;
    ``missing`` names a host whose module is made unimportable (a name that does
    not exist), the only thing simulated."""
    (tmp_path / "test_sample.py").write_text(SAMPLE, encoding="utf-8")
    swap = f"components.HOST_MODULES[{missing!r}] = ('otelmw_no_such_module',)" if missing else ""
    (tmp_path / "conftest.py").write_text(CONFTEST.format(
        tests=str(TESTS), conftest=str(TESTS / "conftest.py"), missing=swap), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    host(*names): hosts\n    every_env: all\n", encoding="utf-8")
    child = {k: v for k, v in os.environ.items()
             if k not in ("CI", "OTELMW_TEST_HOSTS", "OTELMW_TEST_ONLY", "OTELMW_TEST_ENV")}
    child.update(env)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                           str(tmp_path)], cwd=tmp_path, env=child, capture_output=True,
                          text=True, timeout=120)


def last_line(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout.strip().splitlines()[-1]


def test_env_without_a_host_deselects_its_tests(tmp_path: Path) -> None:
    proc = run_sample(tmp_path, OTELMW_TEST_HOSTS="openai anthropic", CI="true")
    assert proc.returncode == 0, proc.stdout
    assert "3 passed, 1 deselected" in last_line(proc)
    assert "test_needs_praisonai" not in proc.stdout.replace("deselected", "")


def test_only_runs_the_tests_of_those_hosts(tmp_path: Path) -> None:
    proc = run_sample(tmp_path, OTELMW_TEST_HOSTS="openai praisonai", OTELMW_TEST_ONLY="openai")
    assert proc.returncode == 0, proc.stdout
    assert "2 passed, 2 deselected" in last_line(proc)
    assert "PASSED test_sample.py::test_needs_openai" in proc.stdout
    assert "PASSED test_sample.py::test_everywhere" in proc.stdout


def test_host_missing_in_an_env_that_provides_it_fails(tmp_path: Path) -> None:
    proc = run_sample(tmp_path, missing="praisonai", OTELMW_TEST_HOSTS="openai praisonai",
                      OTELMW_TEST_ENV="current")
    assert proc.returncode == 1
    assert "3 passed, 1 error" in last_line(proc)
    assert "matrix environment 'current' provides it" in proc.stdout


def test_host_missing_outside_the_matrix_skips_or_fails_under_ci(tmp_path: Path) -> None:
    skipped = run_sample(tmp_path, missing="praisonai")
    assert skipped.returncode == 0 and "3 passed, 1 skipped" in last_line(skipped)
    failed = run_sample(tmp_path, missing="praisonai", CI="true")
    assert failed.returncode == 1 and "3 passed, 1 error" in last_line(failed)
    assert "required when CI is set" in failed.stdout


def test_unknown_host_name_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "test_typo.py").write_text(
        'import pytest\n\n@pytest.mark.host("opneai")\ndef test_x():\n    pass\n')
    proc = run_sample(tmp_path, OTELMW_TEST_HOSTS="openai")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "unknown host(s) ['opneai']" in proc.stdout + proc.stderr


# --------------------------------------------- scripts/test-all.sh and the machine
TOOLS = ("bash", "sed", "head", "ls", "basename", "dirname", "xargs", "grep", "cat", "rm",
         "mkdir", "touch", "env", "printf")


def fake_machine(tmp_path: Path, *, uid: int, tools: dict[str, str]) -> dict[str, str]:
    """An environment whose PATH holds only basic tools, ``python3`` (that installs
    nothing) and fakes that record their calls to ``calls.log``: the script is run
    against them up to the point where it would build environments
    (``OTELMW_TEST_ENVS`` selects none)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in TOOLS:
        real = shutil.which(name)
        if real:
            (bin_dir / name).symlink_to(real)
    log = tmp_path / "calls.log"
    # python3 itself, except that it refuses to install anything (pip, venv): a test of
    # the script must never change this machine's Python.
    (bin_dir / "python3").write_text(
        f'#!{shutil.which("bash")}\n'
        f'case "$1 $2" in "-m pip"|"-m venv") echo "python3 $*" >> {log}; exit 97;; esac\n'
        f'exec {sys.executable} "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    fakes = {"id": f'[ "$1" = -u ] && echo {uid} || echo "uid={uid}"',
             "apt-get": "exit 0", "systemctl": "exit 0", "pkill": "exit 0", "killall": "exit 0",
             **tools}
    for name, body in fakes.items():
        path = bin_dir / name
        path.write_text(f'#!{shutil.which("bash")}\necho "{name} $*" >> {log}\n{body}\n')
        path.chmod(0o755)
    return {"PATH": str(bin_dir), "HOME": str(tmp_path), "OTELMW_TEST_ENVS": "none-selected"}


def run_script(env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "test-all.sh")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    log = Path(env["HOME"]) / "calls.log"
    calls = log.read_text().splitlines() if log.exists() else []
    return proc, calls


def test_script_as_root_installs_missing_packages_and_stops_nothing(tmp_path: Path) -> None:
    env = fake_machine(tmp_path, uid=0, tools={})  # no promtool, prometheus, compose
    proc, calls = run_script(env)
    installs = [c for c in calls if c.startswith("apt-get") and " install " in f" {c} "]
    assert installs and "prometheus" in installs[0] and "docker-compose" in installs[0]
    assert not [c for c in calls if c.split()[0] in ("systemctl", "pkill", "killall")]
    assert not [c for c in calls if c.startswith("python3")], calls
    assert "no environment selected" in proc.stderr  # went on past the install step


def test_script_accepts_compose_v2(tmp_path: Path) -> None:
    env = fake_machine(tmp_path, uid=0, tools={
        "docker": '[ "$1 $2" = "compose version" ] && exit 0; exit 1',
        "promtool": "exit 0", "prometheus": "exit 0"})
    proc, calls = run_script(env)
    assert "docker compose version" in calls
    assert not [c for c in calls if c.startswith("apt-get")], calls
    assert "installing Debian packages" not in proc.stderr


def test_script_without_root_names_the_packages_instead_of_installing(tmp_path: Path) -> None:
    env = fake_machine(tmp_path, uid=1000, tools={"docker-compose": "exit 0"})
    proc, calls = run_script(env)
    assert not [c for c in calls if c.startswith("apt-get")], calls
    assert "sudo apt-get install --no-install-recommends prometheus" in proc.stderr
    assert "no environment selected" in proc.stderr  # did not stop half-way


def test_readme_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash scripts/test-all.sh" in ci
    assert "bash scripts/test-all.sh" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert ".cache/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
