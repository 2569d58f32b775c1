# etcd for scripts/services (sourced by it; uses its say, die, CACHE, RUN, ETCD_PORT and
# ETCD_PEER_PORT): where the binary comes from, fetching Debian's etcd-server package into the
# cache, and the server's command line. The jar services' counterparts live in the script.
# shellcheck shell=bash

ETCD_CACHE="$CACHE/etcd-server"

# The etcd binary that `up etcd` runs: NEREUS_ETCD_BIN, else `etcd` on PATH, else the one
# unpacked in the cache; returns 1 when there is none (yet).
etcd_binary() {
  if [[ -n ${NEREUS_ETCD_BIN:-} ]]; then
    echo "$NEREUS_ETCD_BIN"
  elif ! command -v etcd 2>/dev/null; then
    [[ -f $ETCD_CACHE/.complete && -x $ETCD_CACHE/usr/bin/etcd ]] || return 1
    echo "$ETCD_CACHE/usr/bin/etcd"
  fi
}

# "3.4.23" from `etcd --version` (empty if it does not run)
etcd_version() {
  { "$1" --version 2>/dev/null || true; } | sed -n 's/^etcd Version: //p'
}

# Dies unless $1 runs and is etcd 3.4 or newer (the v3 JSON gateway at /v3/).
etcd_usable() {
  local version
  version=$(etcd_version "$1")
  [[ $version =~ ^([0-9]+)\.([0-9]+)\. ]] \
    || die "etcd: \`$1 --version\` does not say an etcd version"
  ((BASH_REMATCH[1] > 3 || (BASH_REMATCH[1] == 3 && BASH_REMATCH[2] >= 4))) \
    || die "etcd: $1 is etcd $version; need 3.4 or newer"
}

etcd_fetch_failed() {
  local tmp=$1 fetchlog=$2 why=$3
  tail -n 5 "$fetchlog" >&2
  rm -rf "$tmp"
  die "etcd: $why (log: $fetchlog)"
}

# Debian's etcd-server package, downloaded and unpacked into the cache (not installed: no
# root once apt has its lists, nothing changed outside the cache, and no init script that
# would start a system etcd on port 2379). Skipped when etcd_binary already finds one.
fetch_etcd() {
  local bin
  if bin=$(etcd_binary); then
    etcd_usable "$bin"
    say "etcd: using $bin (etcd $(etcd_version "$bin"))"
    return 0
  fi
  mkdir -p "$CACHE" "$RUN"
  exec 9>"$CACHE/.etcd.lock"
  flock 9
  if bin=$(etcd_binary); then
    exec 9>&-
    etcd_usable "$bin"
    say "etcd: using $bin (etcd $(etcd_version "$bin"))"
    return 0
  fi
  if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
    die "etcd: no etcd on PATH and no apt-get/dpkg-deb to fetch Debian's etcd-server" \
      "(install etcd 3.4+ or set NEREUS_ETCD_BIN)"
  fi
  local tmp="$ETCD_CACHE.tmp.$$" fetchlog="$RUN/etcd.fetch.log" start=$SECONDS deb version
  rm -rf "$tmp"
  mkdir -p "$tmp"
  say "etcd: fetching Debian's etcd-server package into $ETCD_CACHE (log: $fetchlog)"
  if ! (cd "$tmp" && apt-get download etcd-server) >"$fetchlog" 2>&1; then
    # a machine whose apt has no package lists yet: only root can fetch them
    [[ $(id -u) == 0 ]] || etcd_fetch_failed "$tmp" "$fetchlog" \
      "\`apt-get download etcd-server\` failed; run \`apt-get update\` as root, or install etcd 3.4+ (or set NEREUS_ETCD_BIN)"
    say "etcd: apt-get download failed; running apt-get update and trying again"
    { apt-get update -qq && (cd "$tmp" && apt-get download etcd-server); } >>"$fetchlog" 2>&1 \
      || etcd_fetch_failed "$tmp" "$fetchlog" "could not download Debian's etcd-server"
  fi
  deb=$(find "$tmp" -maxdepth 1 -name 'etcd-server_*.deb' | head -n 1)
  [[ -n $deb ]] || etcd_fetch_failed "$tmp" "$fetchlog" "apt-get download left no etcd-server .deb"
  version=$(dpkg-deb -f "$deb" Version)
  dpkg-deb -x "$deb" "$tmp/pkg" >>"$fetchlog" 2>&1 \
    || etcd_fetch_failed "$tmp" "$fetchlog" "could not unpack $deb"
  etcd_usable "$tmp/pkg/usr/bin/etcd"
  printf 'service=etcd\npackage=etcd-server\nversion=%s\nfetched=%s\n' "$version" "$(date -u +%FT%TZ)" \
    >"$tmp/pkg/.complete"
  rm -rf "$ETCD_CACHE"
  mv "$tmp/pkg" "$ETCD_CACHE"
  rm -rf "$tmp"
  exec 9>&-
  say "etcd: unpacked etcd-server $version ($(du -sh "$ETCD_CACHE" | cut -f1)) in $((SECONDS - start))s"
}

# shellcheck disable=SC2317  # called as "prepare_$svc"
prepare_etcd() {
  local dir="$RUN/etcd" client="http://127.0.0.1:$ETCD_PORT" peer="http://127.0.0.1:$ETCD_PEER_PORT"
  mkdir -p "$dir/data"
  chmod 700 "$dir/data"
  printf '%s\n' \
    "--name=nereus" "--data-dir=$dir/data" \
    "--listen-client-urls=$client" "--advertise-client-urls=$client" \
    "--listen-peer-urls=$peer" "--initial-advertise-peer-urls=$peer" \
    "--initial-cluster=nereus=$peer" "--initial-cluster-state=new" \
    "--initial-cluster-token=nereus-services" \
    "--logger=zap" "--log-outputs=stderr"
}

# etcd-secure: clients over TLS with a certificate of the test CA required (its user and
# role are made by the readiness probe, probe_etcd.etcd_secure_round_trip, which then turns
# etcd's auth on); peers stay on loopback http
# shellcheck disable=SC2317  # called as "prepare_$svc"
prepare_etcd-secure() {
  local dir="$RUN/etcd-secure" client="https://127.0.0.1:$ETCD_SECURE_PORT"
  local peer="http://127.0.0.1:$ETCD_SECURE_PEER_PORT"
  make_certs "$CERTS"
  make_password "$CERTS/etcd-password"
  mkdir -p "$dir/data"
  make_password "$CERTS/etcd-root-password"
  chmod 700 "$dir/data"
  printf '%s\n' \
    "--name=nereus-secure" "--data-dir=$dir/data" \
    "--listen-client-urls=$client" "--advertise-client-urls=$client" \
    "--listen-peer-urls=$peer" "--initial-advertise-peer-urls=$peer" \
    "--initial-cluster=nereus-secure=$peer" "--initial-cluster-state=new" \
    "--initial-cluster-token=nereus-services-secure" \
    "--cert-file=$CERTS/server.pem" "--key-file=$CERTS/server.key" \
    "--trusted-ca-file=$CERTS/ca.pem" "--client-cert-auth" \
    "--logger=zap" "--log-outputs=stderr"
}

# etcd 3.4 refuses to start on architectures other than amd64 and ppc64le unless told
etcd_arch_env() {
  case $(uname -m) in
    x86_64 | ppc64le) ;;
    aarch64) export ETCD_UNSUPPORTED_ARCH=arm64 ;;
    *) ETCD_UNSUPPORTED_ARCH=$(uname -m) && export ETCD_UNSUPPORTED_ARCH ;;
  esac
}
