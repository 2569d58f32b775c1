#!/usr/bin/env python3
"""Readiness probe for the integration-test servers started by ``scripts/services``.

Usage::

    probe.py kafka  [--timeout S] [--pid PID]   # produce one message, consume it back
    probe.py pulsar [--timeout S] [--pid PID]   # same through the Pulsar binary protocol
    probe.py s3     [--timeout S] [--pid PID]   # put one object, get it back
    probe.py etcd   [--timeout S] [--pid PID]   # put one key, get it back, delete it
    probe.py oxia   [--timeout S] [--pid PID]   # the same through the Oxia coordinator
    probe.py oxia-secure [--timeout S] [--pid PID]  # the same over TLS with a client cert
    probe.py s3 --features                      # also check the S3 calls the tests rely on
    probe.py pulsar --features                  # also check delayed delivery, entry metadata

Each probe retries until one round trip succeeds or the deadline passes; it gives up early
if ``--pid`` is given and that process has died. Exit status 0 means ready. Addresses and
credentials come from the same environment variables that ``scripts/services`` reads.

Needs ``confluent-kafka`` (kafka), ``pulsar-client`` (pulsar), ``boto3`` (s3), ``etcd3gw``
(etcd) or the package itself with its generated Oxia messages (oxia) in the Python that
runs it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

# the probes live beside this script (its directory is first on sys.path when it runs)
from probe_etcd import etcd_round_trip, etcd_secure_round_trip
from probe_kafka import kafka_round_trip
from probe_oxia import oxia_round_trip, oxia_secure_round_trip
from probe_pulsar import pulsar_features, pulsar_round_trip
from probe_s3 import s3_features, s3_round_trip
from probe_support import ProcessDied, log, retry

PROBES: dict[str, Callable[[float], str]] = {
    "kafka": kafka_round_trip,
    "pulsar": pulsar_round_trip,
    "s3": s3_round_trip,
    "etcd": etcd_round_trip,
    "etcd-secure": etcd_secure_round_trip,
    "oxia": oxia_round_trip,
    "oxia-secure": oxia_secure_round_trip,
}
FEATURES: dict[str, Callable[[float], str]] = {
    "pulsar": pulsar_features,
    "s3": s3_features,
}


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("service", choices=sorted(PROBES))
    ap.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to keep trying (default 60)"
    )
    ap.add_argument("--pid", type=int, default=None, help="give up if this process exits")
    ap.add_argument(
        "--features", action="store_true", help="after the round trip, check more features"
    )
    args = ap.parse_args()
    started = time.monotonic()
    try:
        print(retry(args.service, PROBES[args.service], args.timeout, args.pid), flush=True)
        if args.features:
            if args.service not in FEATURES:
                log(f"no feature checks for {args.service}")
            else:
                print(FEATURES[args.service](min(args.timeout, 30.0)), flush=True)
    except ImportError as exc:
        log(f"missing Python client for {args.service}: {exc} (python: {sys.executable})")
        return 3
    except (TimeoutError, ProcessDied, RuntimeError) as exc:
        log(str(exc))
        return 1
    log(f"{args.service} ready after {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
