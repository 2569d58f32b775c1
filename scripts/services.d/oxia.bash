# Oxia for scripts/services (sourced by it; uses its say, die, CACHE, RUN, OXIA_PORT and
# OXIA_METRICS_PORT): where the binary comes from, building it once from its Go module into
# the cache, and the server's command line.
# shellcheck shell=bash

OXIA_MODULE=github.com/oxia-db/oxia
# pinned: the module proxy serves no version list for it, so `@latest` (and `go install
# ...@v0.14.0`, which needs the list) fails; an exact version with `go get` works
OXIA_VERSION=${NEREUS_OXIA_VERSION:-v0.14.0}
# our fixes of this version, applied to the module's source before the build (each
# file says which fix and why; see oxia-v0.14.0-write-order.patch)
OXIA_PATCHES=("$HERE"/oxia-"$OXIA_VERSION"-*.patch)
[[ -e ${OXIA_PATCHES[0]} ]] || OXIA_PATCHES=()
# keyed by the patches too: changing one builds again
OXIA_CACHE="$CACHE/oxia-$OXIA_VERSION-$( { echo "$OXIA_VERSION"; cat "${OXIA_PATCHES[@]}" /dev/null; } | sha256sum | cut -c1-10)"

# The oxia binary that `up oxia` runs: NEREUS_OXIA_BIN, else the one built into the cache;
# returns 1 when there is none (yet).
oxia_binary() {
  if [[ -n ${NEREUS_OXIA_BIN:-} ]]; then
    echo "$NEREUS_OXIA_BIN"
  else
    [[ -f $OXIA_CACHE/.complete && -x $OXIA_CACHE/bin/oxia ]] || return 1
    echo "$OXIA_CACHE/bin/oxia"
  fi
}

oxia_build_failed() {
  local tmp=$1 fetchlog=$2 why=$3
  tail -n 20 "$fetchlog" >&2
  rm -rf "$tmp"
  die "oxia: $why (log: $fetchlog)"
}

# Build the server from its Go module at the pinned version, in a throwaway directory
# (nothing of it is kept but the binary): `go get` the command's package in a throwaway
# module (which downloads the module and its dependencies), copy the module's source, apply
# OXIA_PATCHES, and `go build` its ./cmd with the module's own go.mod and go.sum. Needs only
# the Go toolchain and the module proxy (GOPROXY); the module cache and the build cache are
# Go's own (GOMODCACHE, GOCACHE), so a second build is quicker. 3.5 to 6 minutes the first
# time on 2 cores.
fetch_oxia() {
  local bin
  if bin=$(oxia_binary); then
    say "oxia: using $bin"
    return 0
  fi
  mkdir -p "$CACHE" "$RUN"
  exec 9>"$CACHE/.oxia.lock"
  flock 9
  if bin=$(oxia_binary); then
    exec 9>&-
    say "oxia: using $bin"
    return 0
  fi
  command -v go >/dev/null \
    || die "oxia: not built yet and no \`go\` on PATH to build it (install Go 1.24+, or set NEREUS_OXIA_BIN)"
  local tmp="$OXIA_CACHE.tmp.$$" fetchlog="$RUN/oxia.fetch.log" start=$SECONDS
  rm -rf "$tmp"
  mkdir -p "$tmp/module" "$tmp/bin"
  say "oxia: building $OXIA_MODULE $OXIA_VERSION${OXIA_PATCHES:+ with ${#OXIA_PATCHES[@]} fix(es) of ours} into $OXIA_CACHE (a few minutes; log: $fetchlog)"
  # GOTOOLCHAIN=local: build with this Go, never download another toolchain
  if ! (
    set -e
    export GOTOOLCHAIN=local GOFLAGS=-mod=mod
    cd "$tmp/module"
    go mod init nereus-services/oxia
    go get "$OXIA_MODULE/cmd@$OXIA_VERSION"
    src=$(go list -m -f '{{.Dir}}' "$OXIA_MODULE")
    cp -R "$src" "$tmp/src"
    chmod -R u+w "$tmp/src"
    cd "$tmp/src"
    for fix in "${OXIA_PATCHES[@]}"; do
      echo "applying $fix"
      patch -p1 --forward --batch <"$fix"
    done
    go build -trimpath -o "$tmp/bin/oxia" ./cmd
  ) >"$fetchlog" 2>&1; then
    oxia_build_failed "$tmp" "$fetchlog" "could not build $OXIA_MODULE $OXIA_VERSION"
  fi
  "$tmp/bin/oxia" standalone --help >/dev/null 2>&1 \
    || oxia_build_failed "$tmp" "$fetchlog" "the built binary does not run \`standalone --help\`"
  rm -rf "$tmp/module" "$tmp/src"
  printf 'service=oxia\nmodule=%s\nversion=%s\npatches=%s\ngo=%s\nbuilt=%s\n' "$OXIA_MODULE" \
    "$OXIA_VERSION" "${OXIA_PATCHES[*]##*/}" "$(go env GOVERSION)" "$(date -u +%FT%TZ)" \
    >"$tmp/.complete"
  local old
  for old in "$CACHE"/oxia-*; do  # older versions' binaries
    [[ -d $old && $old != "$tmp" && $old != "$OXIA_CACHE" && $old != *.tmp.* ]] && rm -rf "$old"
  done
  rm -rf "$OXIA_CACHE"
  mv "$tmp" "$OXIA_CACHE"
  exec 9>&-
  say "oxia: built $OXIA_VERSION ($(du -sh "$OXIA_CACHE/bin/oxia" | cut -f1)) in $((SECONDS - start))s"
}

# One standalone server: every shard of the `default` namespace on this process, data and
# WAL (fsync on) under the runtime dir. Both addresses are set: each defaults to 0.0.0.0,
# and the metrics port to 8080, Pulsar's web port.
# shellcheck disable=SC2317  # called as "prepare_$svc"
prepare_oxia() {
  local dir="$RUN/oxia"
  mkdir -p "$dir/data"
  printf '%s\n' \
    standalone --log-json \
    --data-dir "$dir/data/db" --wal-dir "$dir/data/wal" \
    --public-addr "127.0.0.1:$OXIA_PORT" --metrics-addr "127.0.0.1:$OXIA_METRICS_PORT" \
    --shards "${NEREUS_OXIA_SHARDS:-1}" \
    --wal-sync-data=true
}

# oxia-secure: an `oxia server` whose public (client) port speaks TLS only and requires a
# client certificate of the test CA (oxia-server.pem names 127.0.0.1 only), beside an `oxia
# coordinator` (started first by start_oxia_coordinator) that assigns it the `default`
# namespace's shard; the coordinator reaches the server's internal port over mTLS too.
# Data and WAL (fsync on) in <runtime dir>/oxia-secure/data.
# shellcheck disable=SC2317  # called as "prepare_$svc"
prepare_oxia-secure() {
  local dir="$RUN/oxia-secure"
  make_certs "$CERTS"
  mkdir -p "$dir/data"
  printf '%s\n' \
    server --log-json \
    --data-dir "$dir/data/db" --wal-dir "$dir/data/wal" --wal-sync-data=true \
    --public-addr "127.0.0.1:$OXIA_SECURE_PORT" \
    --internal-addr "127.0.0.1:$OXIA_SECURE_INTERNAL_PORT" \
    --metrics-addr "127.0.0.1:$OXIA_SECURE_METRICS_PORT" \
    --tls-cert-file "$CERTS/oxia-server.pem" --tls-key-file "$CERTS/oxia-server.key" \
    --tls-trusted-ca-file "$CERTS/ca.pem" --tls-client-auth \
    --internal-tls-cert-file "$CERTS/oxia-server.pem" \
    --internal-tls-key-file "$CERTS/oxia-server.key" \
    --internal-tls-trusted-ca-file "$CERTS/ca.pem" --internal-tls-client-auth
}

# The coordinator of oxia-secure, in a session of its own like the servers (pid file
# oxia-secure-coordinator.pid, log oxia-secure-coordinator.log); its cluster configuration
# names the one server, and it keeps the cluster's status in a file beside the data.
# Started once the server listens: a coordinator that finds no server backs off for seconds.
start_oxia_coordinator() {
  local program=$1 dir="$RUN/oxia-secure" pid
  local pidfile log
  pidfile=$(pidfile_of oxia-secure-coordinator)
  log=$(logfile_of oxia-secure-coordinator)
  local i
  for i in $(seq 50); do
    port_open "$OXIA_SECURE_INTERNAL_PORT" && break
    sleep 0.1
  done
  mkdir -p "$dir"
  if pid=$(running_pid oxia-secure-coordinator); then
    say "oxia-secure: stopping the coordinator left from an earlier start (pid $pid)"
    stop_pid oxia-secure-coordinator "$pid"
  fi
  printf '%s\n' "namespaces:" "  - name: default" "    initialShardCount: 1" \
    "    replicationFactor: 1" "servers:" "  - public: 127.0.0.1:$OXIA_SECURE_PORT" \
    "    internal: 127.0.0.1:$OXIA_SECURE_INTERNAL_PORT" >"$dir/cluster.yaml"
  [[ -f $log ]] && mv -f "$log" "$log.1"
  : >"$log"
  rm -f "$pidfile"
  (
    cd "$dir"
    # shellcheck disable=SC2016  # $$ and $@ belong to the inner bash
    exec setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$program" coordinator \
      --log-json --conf "$dir/cluster.yaml" --metadata file \
      --file-clusters-status-path "$dir/cluster-status.json" \
      --internal-addr "127.0.0.1:$OXIA_SECURE_COORDINATOR_PORT" \
      --metrics-addr "127.0.0.1:$OXIA_SECURE_COORDINATOR_METRICS_PORT" \
      --peer-tls-cert-file "$CERTS/client.pem" --peer-tls-key-file "$CERTS/client.key" \
      --peer-tls-trusted-ca-file "$CERTS/ca.pem" \
      </dev/null >>"$log" 2>&1 8>&- 9>&-
  ) &
  for i in $(seq 50); do
    [[ -s $pidfile ]] && return 0
    sleep 0.1
  done
  die "oxia-secure: the coordinator did not start (see $log)"
}
