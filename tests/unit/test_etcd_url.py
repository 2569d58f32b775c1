"""The etcd coordinator's URL, ``etcd://HOST:PORT/CLUSTER``, and where a cluster's keys go."""

from __future__ import annotations

import pytest

from nereus.adapters.backends.coordination.etcd_wire import EtcdAddress, KeyLayout, parse_etcd_url
from nereus.errors import UsageError


def test_a_url_names_host_port_and_cluster() -> None:
    """HOST, PORT and CLUSTER come out as written; the port defaults to etcd's 2379; an
    IPv6 host keeps its brackets in the URL and loses them in the address."""
    assert parse_etcd_url("etcd://10.0.0.5:23790/prod") == EtcdAddress("10.0.0.5", 23790, "prod")
    assert parse_etcd_url("etcd://etcd.example/eu-1.a_b") == \
        EtcdAddress("etcd.example", 2379, "eu-1.a_b")
    ipv6 = parse_etcd_url("etcd://[::1]:2379/prod")
    assert ipv6 == EtcdAddress("::1", 2379, "prod")
    assert (ipv6.url, ipv6.endpoint) == ("etcd://[::1]:2379/prod", "http://[::1]:2379")


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:2379/prod",  # another scheme
    "etcd://127.0.0.1:2379",  # no cluster
    "etcd://127.0.0.1:2379/",  # an empty cluster
    "etcd://127.0.0.1:2379/prod/eu",  # two segments
    "etcd://127.0.0.1:2379/-prod",  # starts with punctuation
    "etcd://127.0.0.1:2379/pr od",  # a space
    "etcd://127.0.0.1:2379/prod?x=1",  # a query
    "etcd://127.0.0.1:99999/prod",  # a port out of range
    "etcd:///prod",  # no host
])
def test_a_url_that_is_not_etcd_host_port_cluster_is_a_usage_error(url: str) -> None:
    """Anything but etcd://HOST[:PORT]/CLUSTER, with a cluster name of one segment of
    letters, digits, '.', '_' and '-', is a UsageError whose hint shows the form."""
    with pytest.raises(UsageError) as refused:
        parse_etcd_url(url)
    assert refused.value.hint is not None and "etcd://HOST:PORT/CLUSTER" in refused.value.hint


def test_a_cluster_keeps_records_and_sessions_apart_under_its_root() -> None:
    """Records are under /nereus/<cluster>/keys/ (UTF-8), sessions under
    /nereus/<cluster>/sessions/, and a record's etcd key maps back to its key."""
    layout = KeyLayout.of("prod")
    assert layout.record("nodes/é") == "/nereus/prod/keys/nodes/é".encode()
    assert layout.key_of(layout.record("nodes/é")) == "nodes/é"
    assert layout.session(255) == b"/nereus/prod/sessions/00000000000000ff"
    assert not layout.session(1).startswith(layout.records.encode())
