"""What an incremental state digest would cost: options 2 and 3 of decision 0027 against v2.

Usage::

    .venv/bin/python bench/digest_leaves.py [--messages N] [--change PCT] [--boundary crc|last]
                                            [--leaf-pairs 4|8|16|32|64]
                                            [--cache-dir DIR] [--json]

Decision record 0027 asks whether a checkpoint could digest only what changed since its
parent. Digest v2's leaves are fixed key prefixes, too coarse to reuse. This bench measures
option 2 (and 3) on ``bench/verify_shard.py``'s cached shard of N generated messages
(default 1,000,000), without changing product code:

1. **full digests** of the parent state: bare iteration of every replicated pair, v2 as
   shipped, and the candidate: a leaf ends after a key whose boundary test passes (``crc``:
   CRC-32 of the key is 0 modulo ``--leaf-pairs``, default 16; ``last``: the key's last
   byte is), so a leaf holds that many pairs on average; a leaf's digest is BLAKE3 over
   its MessagePack list of pairs, the root BLAKE3 over the domain and every leaf digest in
   key order.
2. **the change**: ``--change`` percent of N new SCHEDULE messages applied by the runner,
   every key written recorded (what a running owner would track).
3. **the incremental digest** of a RocksDB checkpoint of the changed state: the parent's
   leaves with only the leaves holding a written key re-read and re-hashed; checked equal to
   the candidate's full digest of the same image. Also timed: opening the image read-only
   (what a checkpoint's digest child pays first) and v2's full digest of it.
4. **option 3** beside it: a sum of per-pair hashes (BLAKE2b of each MessagePack pair,
   modulo 2^256), in full and updated from the parent's sum with each written key's old
   value (read from a checkpoint of the parent) out and its new value in; checked equal.

Ratios are against v2's full digest of the same image in the same run. The scratch copy of
the shard is removed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
import zlib
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path

import msgspec
from blake3 import blake3

from checkpoint import change_shard
from nereus.state import keys
from nereus.state.digest import digest_sorted
from nereus.state.store import ShardStore
from verify_shard import ShardSpec, cached_shard

DOMAIN = b"nereus-state-digest/candidate"
_encode = msgspec.msgpack.Encoder().encode

Leaves = tuple[list[bytes], list[bytes]]  # each leaf's last key, each leaf's digest


def crc_cuts(chunk: list[tuple[bytes, bytes]], mask: int) -> list[int]:
    return [i + 1 for i, c in enumerate(map(zlib.crc32, [p[0] for p in chunk])) if not c & mask]


def last_byte_cuts(chunk: list[tuple[bytes, bytes]], mask: int) -> list[int]:
    return [i + 1 for i, p in enumerate(chunk) if not p[0][-1] & mask]


BOUNDARIES: dict[str, Callable[[list[tuple[bytes, bytes]], int], list[int]]] = {
    "crc": crc_cuts, "last": last_byte_cuts}


def leaves_of(pairs: Iterable[tuple[bytes, bytes]], cuts_of: Callable[..., list[int]]
              ) -> Leaves:
    """Every leaf of ``pairs`` (ascending, replicated only); the last may end unbounded."""
    ends: list[bytes] = []
    digests: list[bytes] = []
    pending: list[tuple[bytes, bytes]] = []
    iterator = iter(pairs)
    while chunk := list(islice(iterator, 512)):
        start = 0
        for end in cuts_of(chunk):
            part = pending + chunk[start:end] if pending else chunk[start:end]
            pending = []
            ends.append(part[-1][0])
            digests.append(blake3(_encode(part)).digest())
            start = end
        pending += chunk[start:]
    if pending:
        ends.append(pending[-1][0])
        digests.append(blake3(_encode(pending)).digest())
    return ends, digests


def root_of(leaves: Leaves) -> str:
    return blake3(DOMAIN + b"".join(leaves[1])).hexdigest()


def dirty_runs(ends: list[bytes], written: Iterable[bytes]) -> list[tuple[int, int]]:
    """Runs ``[a, b]`` of consecutive leaves holding a written key (a written leaf end also
    dirties the next leaf: deleting it merges the two)."""
    dirty: set[int] = set()
    last = len(ends) - 1
    for key in written:
        index = min(bisect_left(ends, key), last)
        dirty.add(index)
        if ends[index] == key and index < last:
            dirty.add(index + 1)
    runs: list[tuple[int, int]] = []
    for index in sorted(dirty):
        if runs and runs[-1][1] == index - 1:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    return runs


def incremental(parent: Leaves, written: Iterable[bytes], store: ShardStore,
                cuts_of: Callable[..., list[int]]) -> tuple[Leaves, int]:
    """The new state's leaves from the parent's, re-reading only the dirty runs; and the
    pairs read."""
    ends, digests = parent
    new_ends: list[bytes] = []
    new_digests: list[bytes] = []
    done, read = 0, 0
    for a, b in dirty_runs(ends, (k for k in written if k[0] < keys.REPLICATED_LIMIT)):
        new_ends += ends[done:a]
        new_digests += digests[done:a]
        low = ends[a - 1] if a else b"\x00"
        high = ends[b] if b < len(ends) - 1 else None
        pairs = store.scan(low)  # a plain read: replicated() reads ahead 2 MiB per seek
        pairs = (p for p in pairs if p[0] != low) if a else pairs
        span = list(_until(pairs, high))
        read += len(span)
        run_ends, run_digests = leaves_of(span, cuts_of)
        new_ends += run_ends
        new_digests += run_digests
        done = b + 1
    new_ends += ends[done:]
    new_digests += digests[done:]
    return (new_ends, new_digests), read


def _until(pairs: Iterator[tuple[bytes, bytes]], high: bytes | None
           ) -> Iterator[tuple[bytes, bytes]]:
    for pair in pairs:
        if high is not None and pair[0] > high:
            return
        yield pair


_MOD = 1 << 256


def pair_hash(key: bytes, value: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(_encode((key, value))).digest()[:32], "little")


def additive_full(pairs: Iterable[tuple[bytes, bytes]]) -> int:
    """Option 3: the sum of every pair's hash (modulo 2^256), order-free."""
    return sum(pair_hash(k, v) for k, v in pairs) % _MOD


def additive_update(total: int, written: Iterable[bytes], parent: ShardStore,
                    image: ShardStore) -> int:
    """Option 3 from the parent's sum: each written key's old pair out, its new pair in."""
    for key in written:
        if key[0] >= keys.REPLICATED_LIMIT:
            continue
        old, new = parent.get(key), image.get(key)
        if old is not None:
            total -= pair_hash(key, old)
        if new is not None:
            total += pair_hash(key, new)
    return total % _MOD


def timed(call: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def run(args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, object]:
    boundary, mask = BOUNDARIES[args.boundary], args.leaf_pairs - 1

    def cuts_of(chunk: list[tuple[bytes, bytes]]) -> list[int]:
        return boundary(chunk, mask)

    spec = ShardSpec(messages=args.messages, seed=1, batch=10_000, payload_bytes=100)
    cached, _ = cached_shard(spec, args.cache_dir, rebuild=False, say=say)
    figures: dict[str, object] = {"messages": args.messages, "boundary": args.boundary,
                                  "leaf_pairs": args.leaf_pairs}
    with tempfile.TemporaryDirectory(prefix="nereus-bench-dl-", dir=args.cache_dir) as tmp:
        scratch = Path(tmp)
        shutil.copytree(cached, scratch / "live")
        with ShardStore.open(scratch / "live") as store:
            say("full digests of the parent state")
            figures["bare_s"], pairs = timed(lambda: sum(1 for _ in store.replicated()))
            figures["pairs"] = pairs
            figures["v2_full_parent_s"], _ = timed(lambda: digest_sorted(store.replicated(), 2))
            seconds, parent = timed(lambda: leaves_of(store.replicated(), cuts_of))
            assert isinstance(parent, tuple)
            figures["candidate_full_parent_s"] = seconds
            figures["leaves"] = len(parent[0])
            written: set[bytes] = set()
            plain_write = store.write

            def recording_write(writes: Mapping[bytes, bytes | None], *, sync: bool = True
                                ) -> None:
                written.update(writes)
                plain_write(writes, sync=sync)

            figures["additive_full_parent_s"], parent_sum = timed(
                lambda: additive_full(store.replicated()))
            store.create_checkpoint(scratch / "parent")
            store.write = recording_write  # type: ignore[method-assign]
            changed = args.messages * args.change // 100
            say(f"applying {changed:,} new messages")
            change_shard(store, changed, seed=2)
            store.write = plain_write  # type: ignore[method-assign]
            store.create_checkpoint(scratch / "image")
        figures["keys_written"] = len(written)
        figures["open_image_s"], image = timed(
            lambda: ShardStore.open(scratch / "image", read_only=True))
        assert isinstance(image, ShardStore)
        with image:
            say("digests of the changed image")
            figures["v2_full_s"], _ = timed(lambda: digest_sorted(image.replicated(), 2))
            seconds, fresh = timed(lambda: leaves_of(image.replicated(), cuts_of))
            figures["candidate_full_s"] = seconds
            seconds, result = timed(lambda: incremental(parent, written, image, cuts_of))
            assert isinstance(result, tuple) and isinstance(fresh, tuple)
            updated, read = result
            figures["candidate_incremental_s"] = seconds
            figures["pairs_reread"] = read
            kept = set(parent[1])
            figures["leaves_rehashed_share"] = (
                sum(1 for d in updated[1] if d not in kept) / len(updated[1]))
            assert root_of(updated) == root_of(fresh), "incremental digest differs from full"
            figures["additive_full_s"], fresh_sum = timed(
                lambda: additive_full(image.replicated()))
            with ShardStore.open(scratch / "parent", read_only=True) as before:
                assert isinstance(parent_sum, int)
                seconds, updated_sum = timed(
                    lambda: additive_update(parent_sum, written, before, image))
            figures["additive_incremental_s"] = seconds
            assert updated_sum == fresh_sum, "additive update differs from the full sum"
    v2 = figures["v2_full_s"]
    assert isinstance(v2, float)
    for name in ("candidate_full_s", "candidate_incremental_s", "open_image_s",
                 "additive_full_s", "additive_incremental_s"):
        value = figures[name]
        assert isinstance(value, float)
        figures[name.removesuffix("_s") + "_vs_v2_full"] = value / v2
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--change", type=int, default=1, help="percent of N changed")
    parser.add_argument("--boundary", choices=sorted(BOUNDARIES), default="crc")
    parser.add_argument("--cache-dir", type=Path,
                        default=Path.home() / ".cache" / "nereus-bench")
    parser.add_argument("--leaf-pairs", type=int, choices=(4, 8, 16, 32, 64), default=16,
                        help="mean pairs a leaf (one key in this many ends one)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = run(args, say=lambda line: print(line, file=sys.stderr))
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for name, value in figures.items():
            shown = f"{value:.3f}" if isinstance(value, float) else f"{value:,}" \
                if isinstance(value, int) else value
            print(f"{name:34} {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
