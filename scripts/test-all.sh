#!/usr/bin/env bash
# Run the whole suite in every environment of the host matrix (scripts/envs/*.txt).
# Used verbatim by .ci/run and the README's Quick start; arguments go to pytest.
#
# Each environment is a virtual environment cached under .cache/venvs/<env>-<hash>
# (the hash covers the env's pins, pyproject's [project] table and the Python), created
# when missing with otelmw (editable, [test]) and the env's pinned hosts. The env file's
# "# hosts:" line names the hosts it provides (tests marked for other hosts are
# deselected); "# only:" limits it to the tests of those hosts; "# also:" names a
# dependency pinned beside the hosts because a pinned host release needs an older one.
# OTELMW_TEST_ENVS="current" runs a subset of environments. The environments that run no
# stack test go first (order: below), each venv is built while the environment before it runs its
# tests, and each pytest run uses pytest-xdist (OTELMW_TEST_WORKERS, default one worker
# per CPU; 0: one process).
#
# Components (scripts/components/*.txt) are programs the tests start that need a Python
# of their own (Arize Phoenix: its ~140 dependencies include an anthropic 1.x, where the
# matrix pins 2.x). Each is a venv of its pins alone (no otelmw), cached as
# .cache/venvs/<name>-<hash> (the hash covers its pins and the Python), built in the
# background while the environments build, and handed to the tests of the environments
# its "# envs:" line names as OTELMW_<NAME>_PYTHON. A component that fails to build
# fails the run.
#
# The stack's binaries (an OpenTelemetry Collector of our own and Jaeger v2) are Go
# programs: collector/build.sh builds them in the background as well (Go's caches under
# .cache/go, the binaries under .cache/stack, rebuilt only when a pin changes) and they
# are handed to the tests as OTELMW_OTELCOL_BIN / OTELMW_JAEGER_BIN. A failed build
# fails the run; without `go` the stack tests skip (fail under CI=true).
#
# This script starts and stops nothing but its own venv builds and pytest runs: it never
# stops or kills a service (the tests start their own prometheus and Phoenix on free
# ports, with their own config).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'test-all: %s\n' "$*" >&2; }
PYTHON="${PYTHON:-python3}"

# ----------------------------------------------------------- system tools (Debian)
have_compose() {
  command -v docker-compose >/dev/null 2>&1 && return 0
  command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1
}
need_apt=()
{ command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; } \
  || need_apt+=(prometheus)
have_compose || need_apt+=(docker-compose)
"$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1 || need_apt+=(python3-venv)
if ((${#need_apt[@]})); then
  if ! command -v apt-get >/dev/null 2>&1; then
    say "warning: missing ${need_apt[*]} and no apt-get to install them; the tests that" \
        "need them skip (fail under CI=true)"
  elif [ "$(id -u)" -ne 0 ]; then
    say "missing Debian packages: ${need_apt[*]}. Not root, so not installing them; run:"
    say "    sudo apt-get install --no-install-recommends ${need_apt[*]}"
    say "then run this script again (without them the tests that need them skip, or fail" \
        "under CI=true)."
    [[ " ${need_apt[*]} " == *" python3-venv "* ]] && exit 1  # no environment without it
  else
    say "installing Debian packages: ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "${need_apt[@]}" \
      || { apt-get update -q && apt-get install -y -q --no-install-recommends "${need_apt[@]}"; }
  fi
fi

# ------------------------------------------------------------ matrix environments
# pip_install PY ARGS...: pip of interpreter PY, with its output shown (progress).
pip_install() {
  local py="$1"; shift
  if ! "$py" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
    say "warning: $py is not a virtual environment; installing into it changes that" \
        "Python for everything else on this machine"
  fi
  "$py" -m pip install --disable-pip-version-check --progress-bar off "$@"
}

env_field() {  # env_field FILE NAME: the value of the "# NAME:" header line, if any
  sed -n "s/^# $2:[[:space:]]*//p" "$1" | head -n1
}

env_hash() {  # env_hash FILE KIND: what a cached venv was built from: the pins, the
  # project (KIND "env"; a component has no otelmw in it), the Python
  "$PYTHON" - "$1" "$2" <<'EOF'
import hashlib, json, sys, tomllib
h = hashlib.sha256(open(sys.argv[1], "rb").read())
if sys.argv[2] == "env":
    with open("pyproject.toml", "rb") as f:
        h.update(json.dumps(tomllib.load(f)["project"], sort_keys=True).encode())
h.update(f"{sys.executable} {sys.version}".encode())
print(h.hexdigest()[:12])
EOF
}

ensure_venv() {  # ensure_venv NAME FILE [KIND]: prints the venv directory, ready to use.
  # KIND "env" (default): otelmw (editable, [test]) and the pins; "component": the pins.
  local name="$1" file="$2" kind="${3:-env}" dir
  local -a project=()
  if [ "$kind" = env ]; then project=(-e '.[test]'); fi
  dir=".cache/venvs/$name-$(env_hash "$file" "$kind")"
  if [ -f "$dir/.complete" ]; then
    say "$kind $name: cached venv $dir"
  else
    say "$kind $name: creating venv $dir (${project[*]:+otelmw[test] + }$(grep -v '^#' "$file" | xargs))"
    # Called in a condition, so `set -e` does not apply here: every step checks.
    # this build's leftovers, superseded builds: "$name-<hash>" only (not another env's
    # whose name starts with this one's, "llamaindex-oldest" beside "llamaindex")
    rm -rf .cache/venvs/"$name"-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f] \
      || return 1
    mkdir -p .cache/venvs || return 1
    "$PYTHON" -m venv "$dir" >&2 || return 1
    pip_install "$dir/bin/python" "${project[@]}" -r "$file" >&2 || return 1
    touch "$dir/.complete" || return 1
  fi
  printf '%s\n' "$dir"
}

export CI="${CI:-}"
# Bytecode is written (Python's default), even where the caller's environment says not
# to: the suite starts a few thousand interpreters (host turns, `otelmw run`, pytest
# itself and the hosts' own suites), and each would otherwise compile otelmw, the test
# support code and pytest's assertion rewrites of every test module anew (measured:
# 0.1 s an interpreter, 5 s of collection a pytest process). __pycache__ is git-ignored.
unset PYTHONDONTWRITEBYTECODE
# Run order: first the environments that run no stack test, then the others (those
# limited to hosts that a stack test is marked for, then those that run the whole
# suite): on a cold machine the stack's Go build (minutes) overlaps the first ones'
# installs and runs instead of holding up the first pytest. The stack tests' hosts are
# read off their @pytest.mark.host markers.
stack_hosts=" "
while read -r host; do stack_hosts+="${host//\"/} "; done \
  < <(grep -ho 'mark\.host([^)]*)' tests/test_stack_*.py | grep -o '"[^"]*"')
needs_stack() {  # needs_stack FILE: does this environment run a stack test?
  local only host
  only="$(env_field "$1" only)"
  [ -n "$only" ] || return 0
  for host in $only; do [[ "$stack_hosts" == *" $host "* ]] && return 0; done
  return 1
}
mapfile -t env_files < <(ls scripts/envs/*.txt)
selected=()
later=()
whole=()
for file in "${env_files[@]}"; do
  name="$(basename "$file" .txt)"
  if [ -n "${OTELMW_TEST_ENVS:-}" ] && [[ " $OTELMW_TEST_ENVS " != *" $name "* ]]; then
    continue
  fi
  if [ -z "$(env_field "$file" only)" ]; then whole+=("$file")
  elif needs_stack "$file"; then later+=("$file")
  else selected+=("$file"); fi
done
selected+=(${later[@]+"${later[@]}"} ${whole[@]+"${whole[@]}"})
if ((${#selected[@]} == 0)); then
  say "no environment selected (OTELMW_TEST_ENVS=${OTELMW_TEST_ENVS:-})"
  exit 1
fi

# ------------------------------------------------------------------------ lanes
# The environments run in OTELMW_TEST_LANES lanes at once (default 2): lane 1 takes
# `current` (the stack tests), then the first "only" environment a stack test is marked
# for; lane 2 the others, which start at once, then the remaining stack ones. An
# environment with stack tests waits for the stack's build. Within a lane they run one
# after another. Why two at once on two cores: an environment keeps
# the cores busy about two thirds of its wall time (its tests wait on child processes,
# servers and the stack's decision timers; each environment's CPU time is printed beside
# its wall time), and the two lanes fill each other's waits. Each environment's output
# is kept in .cache/logs/<env>.log and printed whole when it ends; OTELMW_TEST_LANES=1
# runs them one at a time, their output live.
lanes="${OTELMW_TEST_LANES:-2}"
[[ "$lanes" =~ ^[12]$ ]] || { say "OTELMW_TEST_LANES must be 1 or 2, not '$lanes'"; exit 2; }
lane_files=()  # lane_files[K]: the space-separated env files of lane K (1-based)
if ((lanes == 1)); then
  lane_files[1]="${selected[*]}"
else
  # lane 1: the whole suite's environments first (the longest), then the first "only" one
  # a stack test is marked for; lane 2: the others, then the remaining stack ones (the
  # stack is built by then). Measured warm: `current` alone is ~26 of lane 1's minutes
  # and the other environments ~26 together, so each stack "only" one (2-3 minutes)
  # after `current` would leave lane 2 idle at the end.
  lane_files[1]="${whole[*]+${whole[*]}} ${later[0]+${later[0]}}"
  lane_files[2]=""
  for file in "${selected[@]}"; do
    needs_stack "$file" || lane_files[2]+="$file "
  done
  lane_files[2]+="${later[*]:1}"
  [ -n "${lane_files[1]// /}" ] || { lane_files[1]="${lane_files[2]}"; lane_files[2]=""; }
fi
mkdir -p .cache/logs .cache/venvs .cache/stack
results=".cache/logs/results.txt"  # one line per environment and failed build
: >"$results"
record() { printf '%s\n' "$*" >>"$results"; }  # short appends: atomic between lanes

# ------------------------------------------------------------------- components
# Built in the background from here (a pip install of minutes, beside the
# environments' own), waited for just before the first environment using one runs pytest.
# A lane is a subshell, which cannot `wait` for the main shell's jobs: each build leaves
# its exit status in a file, which the lanes poll for.
declare -A component_users=()
selected_names=" $(for file in "${selected[@]}"; do basename "$file" .txt; done | xargs) "
for file in scripts/components/*.txt; do
  [ -e "$file" ] || continue
  name="$(basename "$file" .txt)"
  users=" $(env_field "$file" envs) "
  wanted=0
  for user in $users; do [[ "$selected_names" == *" $user "* ]] && wanted=1; done
  ((wanted)) || continue
  rm -f ".cache/venvs/$name.rc"
  { rc=0
    ensure_venv "$name" "$file" component \
      >".cache/venvs/$name.dir" 2>".cache/venvs/$name.build.log" || rc=$?
    echo "$rc" >".cache/venvs/$name.rc"; } &
  component_users[$name]="$users"
  say "component $name: preparing in the background (log: .cache/venvs/$name.build.log)"
done

# The stack's Go binaries (collector/build.sh: our collector distribution from
# collector/builder-config.yaml, and Jaeger from collector/jaeger/go.mod), cached under
# .cache/stack with Go's caches under .cache/go: built in the background from here (cold:
# minutes, see README), a no-op when cached; waited for before the first pytest run that
# has stack tests and exported as OTELMW_OTELCOL_BIN / OTELMW_JAEGER_BIN. Its progress
# lines start "stack:".
have_stack=0
rm -f .cache/stack/build.rc
if command -v go >/dev/null 2>&1; then
  have_stack=1
  { rc=0; collector/build.sh >.cache/stack/build.env || rc=$?
    echo "$rc" >.cache/stack/build.rc; } &
else
  say "warning: no 'go' on PATH: the collector and Jaeger cannot be built; the stack" \
      "tests skip (fail under CI=true)"
fi

await_rc() {  # await_rc FILE: waits for a background build's status file, prints it
  while [ ! -s "$1" ]; do sleep 1; done
  cat "$1"
}

stack_ready() {  # waits for the stack build (once per lane), exports the binaries' paths
  local waited=$SECONDS var value
  ((have_stack)) || return 0
  have_stack=0
  if [ "$(await_rc .cache/stack/build.rc)" = 0 ]; then
    while IFS='=' read -r var value; do
      export "$var=$value"
      say "stack: ready (waited $((SECONDS - waited))s): $var=$value"
    done <.cache/stack/build.env
  else
    say "stack: FAILED to build the collector or Jaeger (logs: .cache/stack/*.log)"
    record "stack: build FAILED"
  fi
}

declare -A component_done=()
component_ready() {  # component_ready NAME: waits for its build, exports its interpreter
  local name="$1" var waited=$SECONDS
  [ -z "${component_done[$name]:-}" ] || return 0  # waited for already
  component_done[$name]=1
  var="OTELMW_$(printf '%s' "$name" | tr '[:lower:]-' '[:upper:]_')_PYTHON"
  if [ "$(await_rc ".cache/venvs/$name.rc")" = 0 ]; then
    grep '^test-all: ' ".cache/venvs/$name.build.log" >&2 || true  # cached, or built
    export "$var=$PWD/$(cat ".cache/venvs/$name.dir")/bin/python"
    say "component $name: ready (waited $((SECONDS - waited))s): $var=${!var}"
  else
    tail -n 30 ".cache/venvs/$name.build.log" >&2
    say "component $name: FAILED to install (log: .cache/venvs/$name.build.log)"
    record "component $name: install FAILED"
  fi
}

# Within a lane the environments' venvs are built one ahead: the next one's install runs
# in the background while this one's pytest runs (a cached venv is a no-op).
declare -A venv_pid=()
venv_build() {  # venv_build FILE: starts building its venv in the background
  local name
  name="$(basename "$1" .txt)"
  ensure_venv "$name" "$1" >".cache/venvs/$name.dir" 2>".cache/venvs/$name.build.log" &
  venv_pid[$name]=$!
}
venv_ready() {  # venv_ready NAME: waits for its build, sets `venv` to its directory
  # (not a $(...) call: only this shell can wait for its background jobs)
  local name="$1" waited=$SECONDS
  venv=""
  if wait "${venv_pid[$name]}"; then
    grep '^test-all: ' ".cache/venvs/$name.build.log" >&2 || true  # cached, or built
    say "env $name: venv ready (waited $((SECONDS - waited))s; log: .cache/venvs/$name.build.log)"
    venv="$(cat ".cache/venvs/$name.dir")"
  else
    tail -n 30 ".cache/venvs/$name.build.log" >&2
    return 1
  fi
}

# pytest-xdist's workers (OTELMW_TEST_WORKERS, default: one per CPU; 0 runs in one
# process): most tests wait on servers and child processes, so two workers use the
# two cores the suite's budget is set for. Tests are handed out a module at a time
# (--dist loadfile, refined by tests/_support/scheduling.py: the longest first, the
# modules whose tests share no fixture a test at a time), so a module's fixtures (a
# server, an installed plugin) start once.
workers="${OTELMW_TEST_WORKERS:-$(nproc 2>/dev/null || echo 1)}"
xdist=()
if [ "$workers" != 0 ]; then xdist=(-n "$workers" --dist loadfile); fi

children_cpu() {  # sets `cpu_now`: whole CPU seconds (user + system) of this shell's
  # waited-for children (`times` in this shell itself: a subshell's children are its own)
  local user sys value file=".cache/logs/times.$BASHPID"
  times >"$file"
  read -r user sys < <(tail -n1 "$file")  # e.g. "12m3.456s 0m40.100s"
  rm -f "$file"
  cpu_now=0
  for value in "$user" "$sys"; do
    value="${value%%.*}"; value="${value%s}"  # "12m3"
    cpu_now=$((cpu_now + 10#${value%%m*} * 60 + 10#${value#*m}))
  done
}

run_lane() {  # run_lane K FILE...: lane K's environments, one after another
  local lane="$1" file name start rc took cpu cpu_before hosts only component log result
  local i=0
  shift
  (($#)) || return 0
  venv_build "$1"
  for file in "$@"; do
    i=$((i + 1))
    name="$(basename "$file" .txt)"
    start=$SECONDS
    say "=== lane $lane [$i/$#] env $name: preparing"
    venv_ready "$name" || true
    if ((i < $#)); then venv_build "${@:i+1:1}"; fi
    if [ -z "$venv" ]; then
      say "=== lane $lane env $name: FAILED to install (see above)"
      record "$name: install FAILED"
      continue
    fi
    for component in "${!component_users[@]}"; do
      if [[ "${component_users[$component]}" == *" $name "* ]]; then
        component_ready "$component"
      fi
    done
    hosts="$(env_field "$file" hosts)"
    only="$(env_field "$file" only)"
    if needs_stack "$file"; then stack_ready; fi
    log=".cache/logs/$name.log"
    say "=== lane $lane [$i/$#] env $name: pytest (hosts: $hosts${only:+; only tests of: $only})"
    set +e
    # CPU time (user + system, the run's processes and their children) beside the wall
    # time: their ratio says how much of the two cores an environment's run keeps busy
    children_cpu; cpu_before=$cpu_now
    if ((lanes == 1)); then
      PATH="$PWD/$venv/bin:$PATH" VIRTUAL_ENV="$PWD/$venv" \
        OTELMW_TEST_ENV="$name" OTELMW_TEST_HOSTS="$hosts" OTELMW_TEST_ONLY="$only" \
        "$venv/bin/python" -m pytest ${xdist[@]+"${xdist[@]}"} "${pytest_args[@]}"
    else
      PATH="$PWD/$venv/bin:$PATH" VIRTUAL_ENV="$PWD/$venv" \
        OTELMW_TEST_ENV="$name" OTELMW_TEST_HOSTS="$hosts" OTELMW_TEST_ONLY="$only" \
        "$venv/bin/python" -m pytest ${xdist[@]+"${xdist[@]}"} "${pytest_args[@]}" \
        >"$log" 2>&1 </dev/null
    fi
    rc=$?
    children_cpu; cpu=$((cpu_now - cpu_before))
    set -e
    took="$(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s, CPU $((cpu / 60))m$((cpu % 60))s"
    case "$rc" in
      0) result="passed ($took)" ;;
      5) result="no tests selected ($took)" ;;  # e.g. a path of another env
      *) result="FAILED, pytest exit $rc ($took)" ;;
    esac
    if ((lanes > 1)); then  # the whole log at once: the other lane's never cuts into it
      { flock 9
        say "=== lane $lane env $name: its pytest output (.cache/logs/$name.log):"
        cat "$log"
        say "=== lane $lane env $name: $result"
      } 9>.cache/logs/print.lock
    else
      say "=== lane $lane env $name: $result"
    fi
    record "$name: $result"
  done
}

pytest_args=("$@")
lane_pids=()
for ((lane = 1; lane <= lanes; lane++)); do
  # shellcheck disable=SC2086  # env file paths have no spaces (scripts/envs/NAME.txt)
  run_lane "$lane" ${lane_files[$lane]} &
  lane_pids+=($!)
done
for pid in "${lane_pids[@]}"; do wait "$pid" || record "a lane: ended with an error (FAILED)"; done
for component in "${!component_users[@]}"; do  # its environments never got to pytest
  [ "$(await_rc ".cache/venvs/$component.rc")" = 0 ] \
    || grep -q "^component $component:" "$results" \
    || record "component $component: install FAILED"
done
if ((have_stack)) && [ "$(await_rc .cache/stack/build.rc)" != 0 ]; then
  grep -q '^stack:' "$results" || record "stack: build FAILED"
fi
say "summary:"
while read -r line; do say "    $line"; done <"$results"
if grep -q 'FAILED' "$results"; then exit 1; fi
if ! grep -q ': passed' "$results"; then
  say "no tests were collected in any environment"
  exit 1
fi
