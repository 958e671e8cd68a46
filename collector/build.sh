#!/usr/bin/env bash
# Build (or find cached) the stack binaries the tests run: our collector distribution
# (collector/builder-config.yaml, built with the OpenTelemetry Collector Builder of the
# same release) and Jaeger v2 (collector/jaeger/go.mod, a wrapper module of
# github.com/jaegertracing/jaeger/cmd/jaeger). Usage:
#
#   collector/build.sh [otelcol] [jaeger]     (default: both)
#
# Prints one line per binary on stdout, ready for `export`:
#   OTELMW_OTELCOL_BIN=/abs/.cache/stack/otelcol-<key>/otelcol-otelmw
#   OTELMW_JAEGER_BIN=/abs/.cache/stack/jaeger-<key>/jaeger
# and progress lines ("stack: ...") on stderr.
#
# Everything Go touches lives under .cache/go (GOPATH, GOMODCACHE, GOCACHE), so a
# clean clone builds cold and a rerun is a no-op. A binary is cached under
# .cache/stack/<name>-<key>, where the key hashes what pins it (the manifest, or the
# wrapper's go.mod and go.sum) and the Go version: it is rebuilt only when a pin (or Go)
# changes; superseded builds are removed. The two build at the same time; concurrent
# callers of this script wait on a lock per binary.
# Builds run at `nice -n 10` (they share the machine with the venv builds).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

say() { printf 'stack: %s\n' "$*" >&2; }
command -v go >/dev/null 2>&1 || { say "no 'go' on PATH (needs Go >= 1.25)"; exit 2; }

export GOPATH="$root/.cache/go"
export GOMODCACHE="$GOPATH/pkg/mod"
export GOCACHE="$GOPATH/build"
export GOBIN="$GOPATH/bin"
export GOFLAGS="-modcacherw -buildvcs=false"  # modcacherw: `rm -rf .cache` works
export GOTOOLCHAIN=local                    # never download another Go
export CGO_ENABLED=0
mkdir -p .cache/stack "$GOPATH"

OCB_VERSION=v0.158.0  # must equal the manifest's otelcol release (ocb checks it)

key_of() {  # key_of FILE...: what a cached binary was built from
  { cat "$@"; go version; } | sha256sum | cut -c1-12
}

# build NAME KEY BINARY COMMAND...: runs COMMAND in .cache/stack/NAME-KEY.tmp (it must
# leave BINARY there) unless .cache/stack/NAME-KEY/BINARY exists; prints the path.
build() {
  local name="$1" key="$2" binary="$3"; shift 3
  local dir=".cache/stack/$name-$key" start=$SECONDS
  exec 9>".cache/stack/$name.lock"
  flock 9
  if [ -x "$dir/$binary" ] && [ -f "$dir/.complete" ]; then
    say "$name: cached $dir/$binary"
  else
    say "$name: building $dir/$binary (cold: several minutes on 2 cores; log: $dir.log)"
    rm -rf ".cache/stack/$name-"*/ ".cache/stack/$name-"*.tmp
    mkdir -p "$dir.tmp"
    if ! (cd "$dir.tmp" && "$@") >"$dir.log" 2>&1; then
      tail -n 40 "$dir.log" >&2
      say "$name: FAILED (log: $dir.log)"
      return 1
    fi
    mkdir -p "$dir"
    mv "$dir.tmp/$binary" "$dir/$binary"
    rm -rf "$dir.tmp"
    touch "$dir/.complete"
    say "$name: built in $((SECONDS - start))s, $(du -m "$dir/$binary" | cut -f1) MB"
  fi
  flock -u 9
  printf '%s\n' "$root/$dir/$binary"
}

build_otelcol() {
  # The builder itself, at the manifest's release, then the distribution: ocb writes
  # main.go/components.go/go.mod into ./_build, runs `go mod tidy`, `go mod download`
  # and `go build -trimpath -ldflags="-s -w"`.
  nice -n 10 go install "go.opentelemetry.io/collector/cmd/builder@$OCB_VERSION" &&
    nice -n 10 "$GOBIN/builder" --config "$root/collector/builder-config.yaml" &&
    mv _build/otelcol-otelmw .
}

build_jaeger() {
  # Jaeger in a module of its own: one module with the collector would lift Jaeger's
  # collector dependencies (v0.140) to ours and not compile. The wrapper repeats
  # Jaeger's `replace` of github.com/Shopify/sarama, which a dependent module ignores.
  (cd "$root/collector/jaeger" &&
    nice -n 10 go build -mod=readonly -trimpath -ldflags='-s -w' \
      -o "$OLDPWD/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger)
}

one() {  # one NAME: builds it, prints its line
  local bin
  case "$1" in
    otelcol)
      bin="$(build otelcol "$(key_of collector/builder-config.yaml)" otelcol-otelmw build_otelcol)"
      printf 'OTELMW_OTELCOL_BIN=%s\n' "$bin" ;;
    jaeger)
      bin="$(build jaeger "$(key_of collector/jaeger/go.mod collector/jaeger/go.sum)" jaeger build_jaeger)"
      printf 'OTELMW_JAEGER_BIN=%s\n' "$bin" ;;
    *) say "unknown binary '$1' (otelcol, jaeger)"; return 2 ;;
  esac
}

# Both at once: one build's module downloads overlap the other's compiling.
names=("$@")
((${#names[@]})) || names=(otelcol jaeger)
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
pids=()
for name in "${names[@]}"; do
  one "$name" >"$out/$name" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for name in "${names[@]}"; do cat "$out/$name"; done
exit "$status"
