#!/usr/bin/env bash
# Install everything the test suite needs (when missing) and run the whole suite.
# Used verbatim by .ci/run and the README's Quick start.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v docker-compose >/dev/null 2>&1 || need_apt+=(docker-compose)
if ((${#need_apt[@]})); then
  if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${need_apt[@]}" >/dev/null 2>&1 \
      || { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${need_apt[@]}" >/dev/null; }
    # Debian starts a prometheus service on install; the tests start their own.
    (command -v systemctl >/dev/null && systemctl stop prometheus >/dev/null 2>&1) || true
    pkill -x prometheus >/dev/null 2>&1 || true
  else
    echo "warning: cannot install ${need_apt[*]} (no apt-get); related tests will fail in CI" >&2
  fi
fi

python3 -m pip install --disable-pip-version-check -q -e '.[test]'

export CI="${CI:-}"
set +e
python3 -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "no tests were collected" >&2
  exit 1
fi
exit "$rc"
