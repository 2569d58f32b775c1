"""``nereus cluster reseal-evidence-keys``: seal every route's evidence keys again under a
new sealing key (the old one leaked, or is simply due for a change).

The evidence keys stay the same (same generations, same grace), so evidence already signed
verifies as before; only the sealing changes. The old sealing key is read from this home's
``[cluster]`` (``evidence_seal_key_file``, and ``evidence_seal_previous_key_file`` once the
home names the new key already) or ``--seal-key-file``; the new one from
``--new-key-file``. Running nodes keep the keys they opened and keep signing and verifying;
each takes the new sealing key from its ``[cluster]`` settings as soon as they name it (it
reads them again while a record is sealed under a key it does not hold); a node that starts
holding only the old key afterwards is refused, naming the setting. Routes whose key is
still plain are sealed under the new key; a record already sealed under it is left as it
is, so a run stopped part-way is finished by running it again (``docs/security.md``).
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
from nereus.cli.commands.cluster.rotate_key import key_routes, read_seal_key_file, seal_key_from
from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.adapters.cluster.cluster_store import ClusterStore
    from nereus.adapters.cluster.evidence_seal import SealKey
    from nereus.adapters.cluster.sealed_keys import Sealed
    from nereus.cli.commands.cluster.documents import EvidenceKeysResealed, ResealedRouteKey
    from nereus.evidence_mac import EvidenceKeys


@takes_coordinator_security
def reseal_evidence_keys(
    ctx: typer.Context,
    new_key_file: Annotated[Path, typer.Option(
        "--new-key-file", metavar="PATH", help="The new sealing key (64 hex digits, mode "
        "0600: `openssl rand -hex 32 > PATH; chmod 600 PATH`).")],
    reason: Annotated[str, typer.Option(
        "--reason", help="Why (required; kept with your identity in each route's record).")],
    seal_key_file: Annotated[Path | None, typer.Option(
        "--seal-key-file", metavar="PATH", help="The sealing key the records are sealed "
        "under now (default: this home's [cluster] evidence_seal_key_file and "
        "evidence_seal_previous_key_file).")] = None,
    operator: OperatorOpt = None,
    coordinator: CoordinatorOpt = None,
    dry_run: DryRunOpt = False,
    yes: ConfirmOpt = False,
) -> None:
    """Seal every route's evidence keys again under a new sealing key (--new-key-file):
    the evidence keys themselves do not change, so evidence already signed still verifies
    and running nodes keep working. Give each node the new key afterwards
    ([cluster] evidence_seal_key_file; running nodes take it within seconds); a node
    started with only the old key is refused. Needs feature level 2; asks for confirmation
    (`--yes` skips it). Output names sealing keys by fingerprint only."""
    import msgspec

    from nereus.cli.commands.cluster.documents import EvidenceKeysResealed
    from nereus.cli.mutation.options import identity

    env: Env = ctx.obj
    who = identity(operator, reason, None, None)
    old_key = seal_key_from(env, seal_key_file, doing="re-sealing the evidence keys")
    new_key = read_seal_key_file(env, new_key_file)
    with cluster_store(env, coordinator) as store:
        planned = _plan(store, old_key, new_key)
        now = now_ms()
        if not dry_run and any(row.action != "ALREADY" for row in planned):
            if not yes:
                from nereus.cli.mutation.confirmation import ask

                ask(f"re-seal the evidence keys of {len(planned)} route(s) under sealing "
                    f"key {new_key.key_id}")
            _reseal(store, [row.route for row in planned], old_key, new_key, now=now,
                    operator=who.operator, reason=who.reason)
        report = EvidenceKeysResealed(
            cluster=store.handle.cluster, coordinator=store.url, seal_key_id=new_key.key_id,
            old_seal_key_ids=[k for k in old_key.key_ids if k != new_key.key_id],
            operator=who.operator, reason=who.reason,
            result="DRY_RUN" if dry_run else "RESEALED", routes=planned)
    env.output.emit(msgspec.to_builtins(report), lambda out: _print(out, report))


def _plan(store: ClusterStore, old_key: SealKey, new_key: SealKey) -> list[ResealedRouteKey]:
    """Each route's re-seal, checked as far as it can be without writing: every record
    not yet under ``new_key`` opens with ``old_key``."""
    from nereus.adapters.cluster.sealed_keys import read_sealed, sealed_routes
    from nereus.cli.commands.cluster.documents import ResealedRouteKey

    routes = sorted({*key_routes(store, None, doing="re-sealed"), *sealed_routes(store)})
    rows: list[ResealedRouteKey] = []
    for route in routes:
        found = read_sealed(store, route)
        if found is None:
            rows.append(ResealedRouteKey(route=route, action="SEALED", was_seal_key_id=None,
                                         generation=1))
            continue
        record = found.record
        if record.key_id != new_key.key_id:
            _opened(found, old_key)  # refused here, before anything is written
        rows.append(ResealedRouteKey(
            route=route, was_seal_key_id=record.key_id,
            action="ALREADY" if record.key_id == new_key.key_id else "RESEALED",
            generation=record.current.generation,
            previous_generation=None if record.previous is None
            else record.previous.generation))
    return rows


def _opened(found: Sealed, old_key: SealKey) -> EvidenceKeys:
    from nereus.adapters.cluster.sealed_keys import open_route_keys

    return open_route_keys(found.record, old_key)


def _reseal(store: ClusterStore, routes: list[str], old_key: SealKey, new_key: SealKey, *,
            now: int, operator: str, reason: str) -> None:
    from nereus.adapters.cluster.route_keys import share_route_keys
    from nereus.adapters.cluster.sealed_keys import read_sealed, reseal

    share_route_keys(store, routes, now_ms=now, made_by=operator, seal_key=new_key)
    for route in routes:
        found = read_sealed(store, route)
        if found is None or found.record.key_id == new_key.key_id:
            continue
        reseal(store, found, _opened(found, old_key), new_key, now_ms=now, operator=operator,
               reason=reason)


def _print(out: Console, report: EvidenceKeysResealed) -> None:
    from nereus.cli.output import safe_markup as escape

    dry = report.result == "DRY_RUN"
    for row in report.routes:
        if row.action == "ALREADY":
            out.print(f"route {row.route}: sealed under {report.seal_key_id} already")
        elif row.action == "SEALED":
            out.print(f"route {row.route}: {'would seal' if dry else 'sealed'} its key under "
                      f"{report.seal_key_id}")
        else:
            out.print(f"route {row.route}: {'would re-seal' if dry else 're-sealed'} "
                      f"generation {row.generation} from {row.was_seal_key_id} under "
                      f"{report.seal_key_id}")
    if not dry:
        out.print(escape(f"now give every node sealing key {report.seal_key_id} ([cluster] "
                         "evidence_seal_key_file): running nodes take it within seconds; a "
                         "node started with only the old key is refused"))
