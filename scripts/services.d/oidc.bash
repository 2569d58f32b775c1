# kafka-secure's test OIDC token issuer (sourced by scripts/services).
#
# start_oidc_issuer PYTHON: scripts/services.d/oidc_issuer.py over https on
# 127.0.0.1:$KAFKA_SECURE_OIDC_ISSUER_PORT with the test CA's server certificate, in a session
# of its own like the servers (pid file kafka-secure-oidc.pid, log kafka-secure-oidc.log);
# client `nereus`, its secret in <certs>/oidc-client-secret, the JWT signing key in
# <certs>/oidc-signing.key (both made once and kept). Started before the broker, which
# fetches the issuer's JWKS when it starts; stopped after it (`_down kafka-secure-oidc`).
# shellcheck shell=bash

OIDC_CLIENT_ID=nereus
OIDC_AUDIENCE=nereus-kafka

oidc_issuer_url() { echo "https://127.0.0.1:$KAFKA_SECURE_OIDC_ISSUER_PORT"; }

start_oidc_issuer() {
  local python=$1 pidfile log pid i
  pidfile=$(pidfile_of kafka-secure-oidc)
  log=$(logfile_of kafka-secure-oidc)
  if pid=$(running_pid kafka-secure-oidc); then
    say "kafka-secure: stopping the OIDC issuer left from an earlier start (pid $pid)"
    stop_pid kafka-secure-oidc "$pid"
  fi
  port_open "$KAFKA_SECURE_OIDC_ISSUER_PORT" \
    && die "kafka-secure: 127.0.0.1:$KAFKA_SECURE_OIDC_ISSUER_PORT (the OIDC issuer's) is already in use by another process"
  make_password "$CERTS/oidc-client-secret"
  [[ -f $log ]] && mv -f "$log" "$log.1"
  : >"$log"
  rm -f "$pidfile"
  (
    # shellcheck disable=SC2016  # $$ and $@ belong to the inner bash
    exec setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$python" "$HERE/oidc_issuer.py" \
      --port "$KAFKA_SECURE_OIDC_ISSUER_PORT" --cert "$CERTS/server.pem" \
      --cert-key "$CERTS/server.key" --key "$CERTS/oidc-signing.key" \
      --issuer "$(oidc_issuer_url)" --audience "$OIDC_AUDIENCE" --client-id "$OIDC_CLIENT_ID" \
      --secret-file "$CERTS/oidc-client-secret" --services-dir "$RUN" \
      </dev/null >>"$log" 2>&1 8>&- 9>&-
  ) &
  for i in $(seq 100); do
    port_open "$KAFKA_SECURE_OIDC_ISSUER_PORT" && return 0
    pid=$(cat "$pidfile" 2>/dev/null) || pid=
    [[ -z $pid ]] || kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 20 "$log" >&2
  _down kafka-secure-oidc
  die "kafka-secure: the OIDC issuer did not listen on 127.0.0.1:$KAFKA_SECURE_OIDC_ISSUER_PORT within 10s (log: $log)"
}

# the readiness probe's settings for the OIDC listener: a token from the issuer
kafka_secure_probe_oidc() {
  printf '"%s": {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "%s", "sasl.oauthbearer.client.secret": "%s", "sasl.oauthbearer.token.endpoint.url": "%s/token", "https.ca.location": "%s", "ssl.ca.location": "%s"}' \
    "$KAFKA_SECURE_OIDC_PORT" "$OIDC_CLIENT_ID" "$(<"$CERTS/oidc-client-secret")" \
    "$(oidc_issuer_url)" "$CERTS/ca.pem" "$CERTS/ca.pem"
}
