"""The doctor's check of the TLS certificates ``nereus.toml`` names: each CA and client
certificate file is readable PEM and valid now (what a connection refuses otherwise, exit 5),
and a warning ``WARN_DAYS`` ahead of its expiry, while there is time to renew it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Final

from nereus.cli.commands.doctor_routes import check

if TYPE_CHECKING:
    from pathlib import Path

    from nereus.adapters.home.tls_files import Holds
    from nereus.cli.setup_documents import DoctorCheck
    from nereus.config import Config

WARN_DAYS: Final = 14


def certificate_checks(config: Config, home: Path, now: datetime) -> list[DoctorCheck]:
    """One check per certificate file the configuration names (keys are not dated)."""
    from nereus.adapters.home.tls_files import TlsFileMissing, tls_file, valid_until

    checks: list[DoctorCheck] = []
    for table, setting, value, holds in _files(config):
        name, what = f"tls [{table}] {setting}", f"[{table}] {setting}"
        try:
            path = tls_file(what, value, home, holds=holds)
        except TlsFileMissing as exc:
            checks.append(check(name, False, exc.message, exc.hint))
            continue
        assert path is not None  # a value was given
        until = valid_until(path, holds, now)
        if until is None:  # not certificates this can read: the client judges them
            checks.append(check(name, True, f"{path}: PEM (its dates not read here)"))
        elif until - now < timedelta(days=WARN_DAYS):
            left = until - now
            checks.append(check(
                name, False, f"{path} expires at {until:%Y-%m-%dT%H:%M:%SZ}, in "
                f"{left.days} day(s) {left.seconds // 3600} h: then every connection that "
                "uses it is refused", f"renew it before then (doctor warns {WARN_DAYS} days "
                "ahead)", severity="warning"))
        else:
            checks.append(check(name, True, f"{path} valid until {until:%Y-%m-%d}"))
    return checks


def _files(config: Config) -> list[tuple[str, str, str, Holds]]:
    """(table, setting, path, what it holds) of every CA and certificate file named."""
    found: list[tuple[str, str, str | None, Holds]] = []
    for name, kafka in sorted(config.kafka.items()):
        found += [(f"kafka.{name}", "ssl.ca.location", kafka.ssl_ca_location, "ca"),
                  (f"kafka.{name}", "ssl.certificate.location", kafka.ssl_certificate_location,
                   "certificate"),
                  (f"kafka.{name}", "https.ca.location", kafka.https_ca_location, "ca")]
    for name, pulsar in sorted(config.pulsar.items()):
        found += [(f"pulsar.{name}", "tls_trust_certs_file_path",
                   pulsar.tls_trust_certs_file_path, "ca"),
                  (f"pulsar.{name}", "tls_certificate_file_path",
                   pulsar.tls_certificate_file_path, "certificate")]
    found.append(("objects", "ca_bundle", config.objects.ca_bundle, "ca"))
    if config.cluster is not None:
        found += [("cluster", "tls_ca_file", config.cluster.tls_ca_file, "ca"),
                  ("cluster", "tls_cert_file", config.cluster.tls_cert_file, "certificate")]
    return [(table, setting, value, holds) for table, setting, value, holds in found
            if value is not None]
