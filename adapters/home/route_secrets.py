"""Route secrets kept outside the Shard Log: the key destination evidence is signed with.

``<home>/secrets/<route>.evidence-key`` holds 32 random bytes (hex), made on first use with
mode 0600 in a 0700 directory. Every home that publishes or resolves for a route must hold
the same key: ``nereus init --from HOME`` copies it; a home attached to another's route
(``init --attach``) needs that home's key file copied in, or its evidence will not verify.

A cluster node's home holds its cluster's keys (``install_route_keys``): after a rotation
``<route>.evidence-key`` is the new key and ``<route>.evidence-key.previous`` the one
before it with the end of its grace (``HEX UNTIL_MS``); ``evidence_keys`` reads both.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from nereus.errors import UsageError
from nereus.evidence_mac import EvidenceKeys
from nereus.layout import HomeLayout


def key_path(home: Path, route: str) -> Path:
    return HomeLayout(home).root / "secrets" / f"{route}.evidence-key"


def route_key(home: Path, route: str, *, create: bool = True) -> bytes:
    """The route's evidence key (made, 0600, when missing and ``create``)."""
    path = key_path(home, route)
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        if not create:
            raise UsageError(f"no evidence key for route {route} at {path}",
                             hint="copy it from the home that publishes for this route") from None
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        fresh = secrets.token_hex(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it meanwhile: use theirs
            return route_key(home, route, create=False)
        try:
            os.write(fd, (fresh + "\n").encode())
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        return bytes.fromhex(fresh)
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise UsageError(f"{path} is not a hex key", hint="restore it from the home that "
                         "made it (64 hex digits)") from None
    if len(key) < 16:
        raise UsageError(f"{path} holds a key of {len(key)} bytes; at least 16 are needed")
    return key


def _previous_path(home: Path, route: str) -> Path:
    return key_path(home, route).with_name(f"{route}.evidence-key.previous")


def evidence_keys(home: Path, route: str, *, create: bool = True) -> EvidenceKeys:
    """The route's keys in this home: the one it signs with and, after a rotation, the
    previous one until its grace ends."""
    current = route_key(home, route, create=create)
    try:
        hex_key, until = _previous_path(home, route).read_text().split()
        return EvidenceKeys(current=current, previous=bytes.fromhex(hex_key),
                            previous_until_ms=int(until))
    except FileNotFoundError:
        return EvidenceKeys(current=current)
    except ValueError:
        raise UsageError(f"{_previous_path(home, route)} is not HEX UNTIL_MS",
                         hint="delete it: the cluster's node writes it again at start") from None


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(path)


def install_route_keys_ring(home: Path, route: str, keys: EvidenceKeys) -> bool:
    """Give this home the cluster's ``keys`` of the route (after a rotation: the new key
    and the previous one with its grace); whether anything changed. A home holding a key
    that is neither is refused, as ``install_route_key`` refuses it."""
    path = key_path(home, route)
    held = route_key(home, route, create=False) if path.exists() else None
    if held is not None and held not in (keys.current, keys.previous):
        return install_route_key(home, route, keys.current)  # refused, naming the file
    if keys.previous is None:
        return install_route_key(home, route, keys.current)
    previous = f"{keys.previous.hex()} {keys.previous_until_ms}\n"
    prev_path = _previous_path(home, route)
    same = held == keys.current and prev_path.exists() and prev_path.read_text() == previous
    if not same:
        _write_private(prev_path, previous)
        _write_private(path, keys.current.hex() + "\n")
    return not same


def install_route_key(home: Path, route: str, key: bytes) -> bool:
    """Give this home the route's ``key`` (a cluster's, made elsewhere): written 0600 when
    the home has none (True), kept when it holds the same (False); a home that holds
    another key for the route is refused, since evidence signed with one does not verify
    with the other."""
    path = key_path(home, route)
    if path.exists():
        if route_key(home, route, create=False) != key:
            raise UsageError(f"{path} holds another evidence key than the cluster's for route "
                             f"{route}", hint="a node must sign with the cluster's key: move "
                             "that file aside if this home's old evidence is no longer needed")
        return False
    _write_private(path, key.hex() + "\n")
    return True
