"""The Oxia coordinator's URL, ``oxia://HOST:PORT/[NAMESPACE/]CLUSTER``, and the key encoding
that makes Oxia's ``/``-segment order the Protocol's code point order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nereus.adapters.backends.coordination.oxia_keys import (
    OxiaAddress,
    decode_key,
    encode_key,
    parse_oxia_url,
)
from nereus.errors import UsageError

# keys heavy in the characters that matter: '/', '.', their neighbours, and beyond ASCII
KEYS = st.text(alphabet=st.sampled_from("/.-0~aé\U0001f600\x00"), max_size=12) | st.text()


def compare_with_slash(a: bytes, b: bytes) -> int:
    """Oxia's key comparison (``common/compare/compare_with_slash.go``), transcribed."""
    while a and b:
        i, j = a.find(b"/"), b.find(b"/")
        if i < 0 and j < 0:
            return (a > b) - (a < b)
        if i < 0:
            return -1
        if j < 0:
            return 1
        if a[:i] != b[:j]:
            return (a[:i] > b[:j]) - (a[:i] < b[:j])
        a, b = a[i + 1:], b[j + 1:]
    return (len(a) > len(b)) - (len(a) < len(b))


def test_a_url_names_host_port_namespace_and_cluster() -> None:
    """HOST, PORT and CLUSTER come out as written, the port defaults to Oxia's 6648 and the
    namespace to `default`; NAMESPACE/CLUSTER names another namespace; the URL form
    leaves the default namespace out."""
    assert parse_oxia_url("oxia://10.0.0.5:7000/prod") == \
        OxiaAddress("10.0.0.5", 7000, "default", "prod")
    assert parse_oxia_url("oxia://oxia.example/ns-1/eu-1.a_b") == \
        OxiaAddress("oxia.example", 6648, "ns-1", "eu-1.a_b")
    assert parse_oxia_url("oxia://[::1]:6648/prod").target == "[::1]:6648"
    assert parse_oxia_url("oxia://h:1/prod").url == "oxia://h:1/prod"
    assert parse_oxia_url("oxia://h:1/ns/prod").url == "oxia://h:1/ns/prod"


@pytest.mark.parametrize("url", [
    "etcd://127.0.0.1:6648/prod",  # another scheme
    "oxia://127.0.0.1:6648",  # no cluster
    "oxia://127.0.0.1:6648/",  # an empty cluster
    "oxia://127.0.0.1:6648/a/b/c",  # three segments
    "oxia://127.0.0.1:6648/ns/",  # an empty cluster after a namespace
    "oxia://127.0.0.1:6648/-prod",  # starts with punctuation
    "oxia://127.0.0.1:6648/pr od",  # a space
    "oxia://127.0.0.1:6648/prod?x=1",  # a query
    "oxia://127.0.0.1:99999/prod",  # a port out of range
    "oxia:///prod",  # no host
])
def test_a_url_that_is_not_oxia_host_port_cluster_is_a_usage_error(url: str) -> None:
    """Anything but oxia://HOST[:PORT]/[NAMESPACE/]CLUSTER, each name one segment of
    letters, digits, '.', '_' and '-', is a UsageError whose hint shows the form."""
    with pytest.raises(UsageError) as refused:
        parse_oxia_url(url)
    assert refused.value.hint is not None and "oxia://HOST:PORT/CLUSTER" in refused.value.hint


def test_a_cluster_keeps_its_records_under_its_root() -> None:
    """Records are under nereus/<cluster>/ with the key encoded in one segment; an Oxia key
    maps back to its key, and one of another cluster (or not encoded) to None."""
    prod = OxiaAddress("h", 1, "default", "prod")
    assert prod.oxia_key("nodes/n1.a") == "nereus/prod/nodes.~n1..a"
    assert prod.key_of(prod.oxia_key("nodes/é")) == "nodes/é"
    assert prod.key_of("nereus/other/nodes") is None
    assert prod.key_of("nereus/prod/a/b") is None
    assert prod.partition_key == "nereus/prod"


def test_the_trap_oxia_orders_a_prefix_range_out_of_byte_order() -> None:
    """The reason for the encoding: raw, 'x/a' sorts after 'x0' in Oxia (more segments),
    so [x/, x0) is empty there; encoded, the order is byte order."""
    assert compare_with_slash(b"x/a", b"x0") > 0
    assert compare_with_slash(encode_key("x/a").encode(), encode_key("x0").encode()) < 0


@given(KEYS, KEYS)
def test_encoded_keys_compare_in_oxia_as_the_keys_do_by_code_point(a: str, b: str) -> None:
    """For any two keys, Oxia's comparison of their encodings (under one cluster root)
    agrees with the code point comparison of the keys, which is their UTF-8 byte order."""
    root = OxiaAddress("h", 1, "default", "c")
    want = (a > b) - (a < b)
    assert compare_with_slash(root.oxia_key(a).encode(), root.oxia_key(b).encode()) == want


@given(KEYS, KEYS)
def test_the_encoding_round_trips_and_keeps_prefixes(key: str, tail: str) -> None:
    """Decoding gives the key back; an encoding has no '/'; a key's prefix encodes to a
    prefix of its encoding (so a prefix range stays a prefix range)."""
    encoded = encode_key(key + tail)
    assert "/" not in encoded
    assert decode_key(encoded) == key + tail
    assert encoded.startswith(encode_key(key))


@pytest.mark.parametrize("bad", ["a/b", "a.", "a.b", "a.~/"])
def test_a_string_the_encoding_cannot_make_does_not_decode(bad: str) -> None:
    """A '/', a lone '.', or '.' before anything but '.' or '~' is not an encoding."""
    with pytest.raises(ValueError, match="not an encoded key"):
        decode_key(bad)
