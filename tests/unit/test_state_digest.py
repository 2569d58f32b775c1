"""The state digest: v2's range digests combine to the whole, v1 is unchanged."""

from __future__ import annotations

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from nereus.state.digest import (
    DIGEST_VERSION,
    LEAF_BYTES,
    combine,
    digest_pairs,
    digest_sorted,
    leaf_digests,
    leaf_of,
)


def _pairs() -> list[tuple[bytes, bytes]]:
    """Replicated families with big leaves (more than a chunk) and small ones, short keys,
    and local keys that must not count."""
    pairs = [(bytes([prefix]) + f"k{i}".encode(), f"v{i}".encode() * 3)
             for prefix in (1, 2, 3, 0x81) for i in range(5_000)]
    pairs += [(b"\x08" + f"{i:05x}".encode(), b"lane") for i in range(300)]
    pairs += [(b"\x02", b"short"), (b"\x04a", b""), (b"\x04ab", b"x")]
    return sorted(pairs)


def _leaves_of_ranges(pairs: list[tuple[bytes, bytes]],
                      cuts: list[bytes]) -> list[tuple[bytes, bytes]]:
    bounds = [b"\x00", *cuts, b"\x80"]
    leaves: list[tuple[bytes, bytes]] = []
    for lo, hi in itertools.pairwise(bounds):
        leaves += leaf_digests(p for p in pairs if lo <= p[0] < hi)
    return leaves


def test_the_v1_digest_is_the_one_earlier_builds_wrote() -> None:
    """v1 still hashes the same bytes (the value the pre-v2 code gives): format 1
    checkpoints keep verifying."""
    assert digest_sorted(_pairs(), 1) == \
        "71f4b81c83d8981ee8eb51e08f6ac5ddc0dc8a9286d2bcd43878e3e714ed2cf5"


def test_v2_is_the_default_and_differs_from_v1() -> None:
    """The build writes v2; the two versions never agree by accident on real data."""
    pairs = _pairs()
    assert DIGEST_VERSION == 2
    assert digest_sorted(pairs) == digest_sorted(pairs, 2) != digest_sorted(pairs, 1)


def test_ranges_cut_at_leaf_boundaries_combine_to_the_whole_digest() -> None:
    """Cut the key space anywhere at leaf boundaries (one cut, many, inside a family, at
    a short key): the ranges' leaf digests, concatenated, give the whole digest."""
    pairs = _pairs()
    whole = digest_sorted(pairs)
    rng = random.Random(7)
    replicated = [k for k, _ in pairs if k[0] < 0x80]
    for count in (1, 2, 3, 7, 20):
        cuts = sorted({leaf_of(k) for k in rng.sample(replicated, count)})
        assert combine(_leaves_of_ranges(pairs, cuts)) == whole, cuts
    assert combine(_leaves_of_ranges(pairs, [b"\x02", b"\x04a", b"\x04ab"])) == whole


def test_a_leaf_is_every_key_sharing_the_first_bytes() -> None:
    """Leaves are fixed by the keys alone: each key's first LEAF_BYTES bytes, in key order,
    and a leaf bigger than a read chunk is still one leaf."""
    pairs = _pairs()
    leaves = [leaf for leaf, _ in leaf_digests(pairs)]
    assert leaves == sorted({k[:LEAF_BYTES] for k, _ in pairs if k[0] < 0x80})
    assert all(len(digest) == 32 for _, digest in leaf_digests(pairs))


def test_local_keys_and_order_of_input_do_not_change_the_digest() -> None:
    """Local runtime keys (0x80 and up) are excluded; digest_pairs sorts first."""
    pairs = _pairs()
    replicated = [p for p in pairs if p[0][0] < 0x80]
    shuffled = list(pairs)
    random.Random(1).shuffle(shuffled)
    assert digest_pairs(shuffled) == digest_sorted(replicated) == digest_sorted(pairs)


def test_changing_any_value_or_key_changes_the_digest() -> None:
    """One byte of one value, or one pair missing, gives another digest."""
    pairs = _pairs()
    whole = digest_sorted(pairs)
    changed = list(pairs)
    changed[1234] = (changed[1234][0], changed[1234][1] + b"!")
    assert digest_sorted(changed) != whole
    assert digest_sorted(pairs[:1234] + pairs[1235:]) != whole


@settings(max_examples=60, deadline=None)
@given(keys=st.sets(st.binary(min_size=1, max_size=7).filter(lambda k: k[0] < 0x80),
                    max_size=60),
       cut_keys=st.lists(st.binary(min_size=1, max_size=7), max_size=4))
def test_any_leaf_boundary_cuts_give_the_same_digest(keys: set[bytes],
                                                     cut_keys: list[bytes]) -> None:
    """Property: for any keys and any cuts at leaf boundaries, the ranges combine to the
    whole (also with empty ranges and keys shorter than a leaf)."""
    pairs = sorted((k, k[::-1]) for k in keys)
    cuts = sorted({leaf_of(k) for k in cut_keys if b"\x00" < leaf_of(k) < b"\x80"})
    assert combine(_leaves_of_ranges(pairs, cuts)) == digest_sorted(pairs)
