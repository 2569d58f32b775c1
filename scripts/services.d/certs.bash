# Throwaway TLS material for the secured services (sourced by scripts/services).
#
# make_certs DIR: a CA (ca.pem), a server certificate for 127.0.0.1 and localhost
# (server.pem, server.key, and server-keystore.pem = key + certificate for Kafka's PEM key
# store), a client certificate (client.pem, client.key, CN nereus-client) and one without a
# CommonName for etcd (etcd-client.pem, .key), and Oxia's server certificate naming
# 127.0.0.1 only, not localhost (oxia-server.pem, .key: dialling oxia-secure as localhost
# shows a wrong server name), all signed by the CA, made once with openssl
# and kept (a missing one is added); keys PKCS#8, unencrypted, 0600 in a 0700
# directory. Nothing here is secret outside a test run: the CA lives in the runtime dir.
# shellcheck shell=bash

make_certs() {
  local dir=$1 days=3650
  [[ -f $dir/etcd-client.pem && -f $dir/oxia-server.pem ]] && return 0
  command -v openssl >/dev/null || die "openssl is needed to make the secured services' certificates"
  mkdir -p "$dir"
  chmod 700 "$dir"
  local tmp="$dir/.tmp.$$"
  mkdir -p "$tmp"
  (
    umask 077
    cd "$tmp"
    if [[ -f $dir/ca.pem ]]; then
      cp "$dir/ca.pem" "$dir/ca.key" .
    else
      openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days "$days" \
        -subj "/CN=nereus-test-ca" -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    fi
    local name subject ext
    for name in server client etcd-client oxia-server; do
      [[ -f $dir/$name.pem ]] && continue
      case $name in
        server) subject=/CN=localhost
          ext="subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth" ;;
        client) subject=/CN=nereus-client ext="extendedKeyUsage=clientAuth" ;;
        # etcd 3.4's JSON gateway refuses a client certificate with a CommonName (it could
        # not pass it on as the user): the etcd clients' certificate has none
        etcd-client) subject=/O=nereus ext="extendedKeyUsage=clientAuth" ;;
        oxia-server) subject=/CN=oxia-secure
          ext="subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth" ;;
      esac
      openssl req -newkey rsa:2048 -nodes -keyout "$name.rsa" -out "$name.csr" \
        -subj "$subject" 2>/dev/null
      openssl pkcs8 -topk8 -nocrypt -in "$name.rsa" -out "$name.key"
      printf '%s\n' "$ext" >"$name.ext"
      openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
        -out "$name.pem" -days "$days" -extfile "$name.ext" 2>/dev/null
      rm -f "$name.rsa" "$name.csr" "$name.ext"
    done
    [[ -f $dir/server-keystore.pem ]] || cat server.key server.pem >server-keystore.pem
    rm -f ca.srl
  ) || { rm -rf "$tmp"; die "openssl could not make the test certificates in $dir"; }
  cp -n "$tmp"/* "$dir"/ 2>/dev/null || true
  rm -rf "$tmp"
}

# a throwaway password: 24 random URL-safe characters in file $1 (0600), made once
make_password() {
  local file=$1
  [[ -s $file ]] && return 0
  (umask 077; head -c 18 /dev/urandom | base64 | tr '+/' '-_' >"$file")
}

# make_token KEY TOKEN SUBJECT: an HS256 key (32 random bytes, file KEY, as Pulsar's
# tokenSecretKey reads it) and a JWT for SUBJECT signed with it (file TOKEN), made once
make_token() {
  local key=$1 token=$2 subject=$3
  [[ -s $token ]] && return 0
  (
    umask 077
    [[ -s $key ]] || head -c 32 /dev/urandom >"$key"
    b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
    local header payload hexkey signature
    header=$(printf '{"alg":"HS256"}' | b64url)
    payload=$(printf '{"sub":"%s"}' "$subject" | b64url)
    hexkey=$(od -An -v -tx1 "$key" | tr -d ' \n')
    signature=$(printf '%s.%s' "$header" "$payload" \
      | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$hexkey" -binary | b64url)
    printf '%s.%s.%s\n' "$header" "$payload" "$signature" >"$token"
  )
}
