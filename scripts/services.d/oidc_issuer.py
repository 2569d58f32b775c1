"""A minimal OAuth/OIDC token issuer for kafka-secure's OIDC listener (test only).

Serves, over https on loopback with a certificate of the scripts' test CA:
  POST /token  the client-credentials grant: the client authenticates with HTTP Basic (as
               librdkafka's sasl.oauthbearer.method=oidc does) or client_id/client_secret
               form fields; a right id and secret get an RS256 JWT with sub (the client id),
               scope (the scope asked for, else the default), aud, iss, iat and exp; anything
               else gets 401 {"error": "invalid_client"} (the secret never echoed)
  GET  /jwks   the JSON Web Key Set with the one signing key (kid "nereus-test")

The signing key (RSA 2048, PKCS#8) is made once in --key and kept, so that a restarted
issuer signs with the key the broker already holds. Started and stopped by
scripts/services (kafka-secure); stdlib and the `cryptography` package only. It is not an
identity provider: one client, no discovery document, no refresh tokens, no key rotation.
"""

from __future__ import annotations

import argparse
import base64
import hmac
import json
import os
import ssl
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

KID = "nereus-test"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signing_key(path: Path) -> rsa.RSAPrivateKey:
    """The key in ``path``, made (0600) when absent."""
    if not path.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
        os.replace(tmp, path)
    loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(loaded, rsa.RSAPrivateKey)
    return loaded


def jwks(key: rsa.RSAPrivateKey) -> dict[str, object]:
    numbers = key.public_key().public_numbers()

    def as_b64(n: int) -> str:
        return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))

    return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": KID,
                      "n": as_b64(numbers.n), "e": as_b64(numbers.e)}]}


def token(key: rsa.RSAPrivateKey, claims: dict[str, object]) -> str:
    header = b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": KID}).encode())
    body = b64url(json.dumps(claims).encode())
    signature = key.sign(f"{header}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{body}.{b64url(signature)}"


class Issuer(BaseHTTPRequestHandler):
    server_version = "nereus-test-oidc"
    settings: argparse.Namespace
    key: rsa.RSAPrivateKey

    def reply(self, status: int, document: dict[str, object]) -> None:
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.split("?")[0] == "/jwks":
            self.reply(200, jwks(self.key))
        else:
            self.reply(404, {"error": "not_found"})

    def client(self, form: dict[str, str]) -> tuple[str, str]:
        basic = self.headers.get("Authorization", "")
        if basic.lower().startswith("basic "):
            decoded = base64.b64decode(basic[6:].strip()).decode(errors="replace")
            client_id, _, secret = decoded.partition(":")
            return urllib.parse.unquote(client_id), urllib.parse.unquote(secret)
        return form.get("client_id", ""), form.get("client_secret", "")

    def do_POST(self) -> None:
        if self.path.split("?")[0] != "/token":
            self.reply(404, {"error": "not_found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode(errors="replace")))
        client_id, secret = self.client(form)
        expected = Path(self.settings.secret_file).read_text().strip()
        if client_id != self.settings.client_id or \
                not hmac.compare_digest(secret.encode(), expected.encode()):
            self.reply(401, {"error": "invalid_client",
                             "error_description": "unknown client or wrong client secret"})
            return
        if form.get("grant_type") != "client_credentials":
            self.reply(400, {"error": "unsupported_grant_type"})
            return
        now = int(time.time())
        claims = {"sub": client_id, "scope": form.get("scope") or self.settings.scope,
                  "aud": self.settings.audience, "iss": self.settings.issuer,
                  "iat": now, "exp": now + self.settings.lifetime}
        self.reply(200, {"access_token": token(self.key, claims), "token_type": "Bearer",
                         "expires_in": self.settings.lifetime})

    def log_message(self, format: str, *args: object) -> None:
        # the request line only: never a header (the client's secret travels in one)
        print(f"oidc-issuer: {self.address_string()} {format % args}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--cert-key", required=True)
    parser.add_argument("--key", required=True, help="the JWT signing key (made if absent)")
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--audience", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--secret-file", required=True)
    parser.add_argument("--scope", default="nereus.write")
    parser.add_argument("--lifetime", type=int, default=3600)
    parser.add_argument("--services-dir", required=True, help="marks the process as ours")
    settings = parser.parse_args()
    Issuer.settings = settings
    Issuer.key = signing_key(Path(settings.key))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(settings.cert, settings.cert_key)
    server = ThreadingHTTPServer(("127.0.0.1", settings.port), Issuer)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"oidc-issuer: listening on https://127.0.0.1:{settings.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
