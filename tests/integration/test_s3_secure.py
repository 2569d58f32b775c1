"""S3 over https against a real S3Proxy with the test CA's certificate (``scripts/services up
s3-secure``): ``[objects]`` with ``ca_bundle`` and the secret key from a 0600 file, from the
environment or from an AWS profile stores and reads objects; without the CA the store says
the TLS check failed and what to fix (exit 5), without hanging."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from nereus.adapters.backends.objectstore.factory import open_object_store
from nereus.adapters.backends.objectstore.s3 import S3ObjectStore
from nereus.config import parse_config
from nereus.errors import ExitCode, ServiceUnreachable
from tests.integration.secure_services import SecureS3

pytestmark = pytest.mark.s3


def objects_table(s3: SecureS3, bucket: str, secret: str, *, ca: bool = True) -> str:
    lines = ["[objects]", 'store = "s3"', f'bucket = "{bucket}"', f'endpoint = "{s3.endpoint}"',
             f'access_key_id = "{s3.access_key_id}"', secret]
    if ca:
        lines.append(f'ca_bundle = "{s3.certs / "ca.pem"}"')
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("given", ["file", "env", "profile"])
def test_objects_round_trip_over_https_with_the_secret_by_reference(
        tmp_path: Path, s3_secure: SecureS3, given: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The secret key from a 0600 file, an environment variable or an AWS profile: a bucket
    on the https endpoint takes an object and gives it back."""
    secret = tmp_path / "s3-secret"
    secret.write_text(s3_secure.secret_access_key)
    secret.chmod(0o600)
    monkeypatch.setenv("NEREUS_TEST_S3_SECRET", s3_secure.secret_access_key)
    credentials = tmp_path / "aws-credentials"
    credentials.write_text(f"[nereus]\naws_access_key_id = {s3_secure.access_key_id}\n"
                           f"aws_secret_access_key = {s3_secure.secret_access_key}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    reference = {"file": f'secret_access_key_file = "{secret}"',
                 "env": 'secret_access_key_env = "NEREUS_TEST_S3_SECRET"',
                 "profile": 'profile = "nereus"'}[given]
    bucket = f"nereus-secure-{uuid.uuid4().hex[:12]}"
    text = objects_table(s3_secure, bucket, reference)
    if given == "profile":
        text = text.replace(f'access_key_id = "{s3_secure.access_key_id}"\n', "")
    S3ObjectStore(bucket, endpoint_url=s3_secure.endpoint, access_key_id=s3_secure.access_key_id,
                  secret_access_key=s3_secure.secret_access_key, create_bucket=True,
                  ca_bundle=str(s3_secure.certs / "ca.pem"))
    store = open_object_store(parse_config(text).objects, tmp_path)
    store.put_bytes("a/one", b"over https")
    assert store.get_bytes("a/one") == b"over https"


def test_without_the_ca_the_store_says_tls_failed_and_what_to_fix(
        tmp_path: Path, s3_secure: SecureS3) -> None:
    """No ca_bundle: ServiceUnreachable (exit 5) naming the TLS failure and ca_bundle."""
    secret = tmp_path / "s3-secret"
    secret.write_text(s3_secure.secret_access_key)
    secret.chmod(0o600)
    text = objects_table(s3_secure, "nereus-no-ca", f'secret_access_key_file = "{secret}"',
                         ca=False)
    store = open_object_store(parse_config(text).objects, tmp_path)
    with pytest.raises(ServiceUnreachable) as raised:
        store.get_bytes("anything")
    assert raised.value.exit_code == ExitCode.SERVICE_UNREACHABLE
    assert "failed TLS" in raised.value.message and "ca_bundle" in (raised.value.hint or "")
    assert s3_secure.secret_access_key not in raised.value.message
