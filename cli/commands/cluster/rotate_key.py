"""``nereus cluster rotate-evidence-key``: give each route of the cluster a new evidence key.

The new key is made here and sealed under the cluster's sealing key (read from this home's
``[cluster] evidence_seal_key_file``, or ``--seal-key-file``), so the command runs where a
node's secrets are. The old key becomes the route's previous one: evidence signed with it
still verifies until ``--grace`` has passed. Each running node takes the new key within
its rounds (``engine/hosting/cluster/following.py``); a node that is down takes it when it
starts (``docs/security.md``). A route
whose key is still plain (a cluster raised to level 2 before any node held the sealing
key) is sealed first. Refused below feature level 2, and while a previous rotation's
grace runs (exit 1); nothing is written for any route if one is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nereus.cli.commands.cluster.access import (
    ConfirmOpt,
    CoordinatorOpt,
    DryRunOpt,
    OperatorOpt,
    cluster_store,
    now_ms,
)
from nereus.cli.commands.cluster.coordinator_security import takes_coordinator_security
from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.adapters.cluster.evidence_seal import SealKey
    from nereus.cli.commands.cluster.documents import EvidenceKeyRotation, RotatedRouteKey

DEFAULT_GRACE = "7d"


@takes_coordinator_security
def rotate_evidence_key(
    ctx: typer.Context,
    reason: Annotated[str, typer.Option(
        "--reason", help="Why (required; kept with your identity in the route's record).")],
    route: Annotated[list[str] | None, typer.Option(
        "--route", metavar="NAME", help="A route to rotate (repeatable; default: every "
        "route of the cluster's configuration).")] = None,
    grace: Annotated[str, typer.Option(
        "--grace", metavar="DURATION", help="How long evidence signed with the previous key "
        "still verifies (500ms, 30s, 5m, 2h, 7d).")] = DEFAULT_GRACE,
    seal_key_file: Annotated[Path | None, typer.Option(
        "--seal-key-file", metavar="PATH", help="The cluster's sealing key (64 hex digits, "
        "mode 0600; default: this home's [cluster] evidence_seal_key_file).")] = None,
    operator: OperatorOpt = None,
    coordinator: CoordinatorOpt = None,
    dry_run: DryRunOpt = False,
    yes: ConfirmOpt = False,
) -> None:
    """Give each route a new evidence key, sealed in the coordinator; the previous key
    still verifies evidence for --grace (default 7d). Running nodes sign with the new key
    within seconds, a stopped node from its start. Needs the cluster's sealing key and
    feature level 2; asks for confirmation (`--yes` skips it). Exit status 1 while a
    previous rotation's grace runs, or below feature level 2."""
    import msgspec

    from nereus.cli.commands.cluster.documents import EvidenceKeyRotation
    from nereus.cli.mutation.options import identity
    from nereus.timespec import parse_duration_ms

    env: Env = ctx.obj
    who = identity(operator, reason, None, None)
    grace_ms = parse_duration_ms(grace, field="--grace")
    seal_key = seal_key_from(env, seal_key_file, doing="rotating an evidence key")
    with cluster_store(env, coordinator) as store:
        routes = key_routes(store, route)
        now = now_ms()
        planned = [_plan(store, name, seal_key, now, grace_ms) for name in routes]
        if not dry_run:
            if not yes:
                from nereus.cli.mutation.confirmation import ask

                ask(f"rotate the evidence key of {', '.join(routes)}")
            _rotate(store, routes, seal_key, now=now, grace_ms=grace_ms,
                    operator=who.operator, reason=who.reason)
        report = EvidenceKeyRotation(
            cluster=store.handle.cluster, coordinator=store.url, seal_key_id=seal_key.key_id,
            grace_ms=grace_ms, operator=who.operator, reason=who.reason,
            result="DRY_RUN" if dry_run else "ROTATED", routes=planned)
    env.output.emit(msgspec.to_builtins(report), lambda out: _print(out, report))


def seal_key_from(env: Env, given: Path | None, *, doing: str) -> SealKey:
    """The sealing key from ``--seal-key-file``, else from this home's ``[cluster]`` (with
    the one before it, while it is changed)."""
    from nereus.adapters.cluster.evidence_seal import SETTING, seal_key_of
    from nereus.config import parse_config
    from nereus.errors import UsageError

    if given is not None:
        return read_seal_key_file(env, given)
    path = env.layout.config
    local = parse_config(path.read_text(), source=str(path)) if path.exists() else None
    found = seal_key_of(None if local is None else local.cluster, env.home)
    if found is None:
        raise UsageError(f"{doing} needs the cluster's sealing key",
                         hint=f"run it from a node's home (its {SETTING}), or pass "
                              "--seal-key-file PATH")
    return found


def read_seal_key_file(env: Env, path: Path) -> SealKey:
    """The sealing key in the file ``path`` (64 hex digits, 0600; refused with why)."""
    from nereus.adapters.cluster.evidence_seal import seal_key_of
    from nereus.config.node import ClusterSettings

    found = seal_key_of(ClusterSettings(coordinator="", node_id="operator",
                                        evidence_seal_key_file=str(path.resolve())), env.home)
    assert found is not None  # a file was named: read, or refused with why
    return found


def key_routes(store: ClusterStore, asked: list[str] | None, *, doing: str = "rotated"
               ) -> list[str]:
    """The routes to rotate: ``asked`` (each configured), else every route; refused below
    the feature level that seals keys."""
    from nereus.adapters.cluster.feature_levels import read_level
    from nereus.config import parse_config
    from nereus.errors import NotFound
    from nereus.features import SEALED_KEYS_LEVEL, FeatureLevelError

    record = store.require_config()
    level = read_level(store).level.level
    if level < SEALED_KEYS_LEVEL:
        raise FeatureLevelError(
            f"the cluster is at feature level {level}: its evidence keys are kept in plain "
            f"text, which 0.1.0 nodes read, and cannot be {doing}",
            hint=f"raise it to {SEALED_KEYS_LEVEL} (`nereus upgrade finalize`) first")
    configured = parse_config(record.toml, source=f"the cluster's configuration "
                              f"r{record.revision}").routes
    for name in asked or []:
        if name not in configured:
            raise NotFound(f"the cluster has no route {name}")
    return sorted(set(asked or configured))


def _plan(store: ClusterStore, route: str, seal_key: SealKey, now: int,
          grace_ms: int) -> RotatedRouteKey:
    """What rotating ``route`` does, checked as far as it can be without writing: its
    key opens with ``seal_key`` and no grace runs."""
    from nereus.adapters.cluster.sealed_keys import (
        open_route_keys,
        read_sealed,
        refuse_during_grace,
    )
    from nereus.cli.commands.cluster.documents import RotatedRouteKey

    found = read_sealed(store, route)
    generation = 1
    if found is not None:
        refuse_during_grace(found.record, now)
        generation = open_route_keys(found.record, seal_key).generation
    return RotatedRouteKey(route=route, generation=generation + 1,
                           previous_generation=generation,
                           previous_verifies_until_ms=now + grace_ms)


def _rotate(store: ClusterStore, routes: list[str], seal_key: SealKey, *, now: int,
            grace_ms: int, operator: str, reason: str) -> None:
    from nereus.adapters.cluster.route_keys import share_route_keys
    from nereus.adapters.cluster.sealed_keys import rotate

    share_route_keys(store, routes, now_ms=now, made_by=operator, seal_key=seal_key)
    for route in routes:
        rotate(store, route, seal_key, now_ms=now, grace_ms=grace_ms, operator=operator,
               reason=reason)


def _print(out: Console, report: EvidenceKeyRotation) -> None:
    from nereus.timespec import format_time_ms

    verb = "would rotate" if report.result == "DRY_RUN" else "rotated"
    for row in report.routes:
        out.print(f"{verb} route {row.route}'s evidence key: generation {row.generation} "
                  f"signs; generation {row.previous_generation} verifies until "
                  f"{format_time_ms(row.previous_verifies_until_ms)}")
    out.print("running nodes sign with the new key within seconds, a stopped node once started")
