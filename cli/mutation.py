"""The one path every operator mutation takes: plan, show, confirm, append, report.

``lane open|close|set``, ``attempt resolve``, ``message break``, ``shard pause|resume``
and ``mutate submit`` only build records; this module does the rest, the same way for
all of them:

1. **identity**: ``--as`` (default: the user), ``--reason`` (required, not blank), the
   idempotency key (``--idempotency-key``, else derived from the command's content, so
   running the same command again finds the first result and appends nothing);
2. **plan** per target shard (``nereus.operator.plan_mutation``): through the admin
   socket when the engine runs, else against the shard database opened read-only with
   the log's not yet applied records dry-applied on top (the state the mutation will
   meet, since it is appended after them). The
   plan fills in the precondition digest of what the operator is looking at, so a state
   change between planning and applying makes the mutation STALE instead of acting on a
   world the operator never saw; it also dry-applies the record to say what would change;
3. ``--dry-run`` stops here and writes nothing;
4. **confirmation** for destructive mutations: a prompt on a terminal, ``--yes`` in
   scripts; without a terminal and without ``--yes`` the command refuses (exit 2) rather
   than wait for an answer nobody can give;
5. **append** to the Shard Log (through the engine, or straight to the log file), so the
   mutation is ordered with client commands and the log is the audit trail
   (``nereus shard log SHARD --kind LANE_GATE``); with ``--wait`` the applied result.
"""

from __future__ import annotations

import base64
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nereus.cli.context import Env

if TYPE_CHECKING:
    from rich.console import Console

    from nereus.records.codec import OperatorMutation
    from nereus.shard import ShardId

# the options every mutation command takes (Typer reads these annotations)
ReasonOpt = Annotated[str, typer.Option(
    "--reason", help="Why (required; recorded in the Shard Log with your identity).")]
AsOpt = Annotated[str | None, typer.Option(
    "--as", help="Operator identity to record (default: the user running nereus).")]
KeyOpt = Annotated[str | None, typer.Option(
    "--idempotency-key",
    help="Deduplication key (default: derived from the command's content, so re-running "
         "the same command is a no-op with the same result).")]
PreconditionOpt = Annotated[str | None, typer.Option(
    "--precondition", "--precondition-digest",
    help="Precondition digest from an earlier --dry-run: REJECTED as STALE if the target "
         "changed since (default: the state as it is now).")]
DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Show what would change (messages, lanes, attempts); write nothing.")]
YesOpt = Annotated[bool, typer.Option(
    "--yes", "-y", help="Do not ask for confirmation (scripts; required without a terminal).")]
WaitOpt = Annotated[bool, typer.Option(
    "--wait", help="Wait for the applied result (needs the engine).")]


@dataclass(frozen=True)
class Identity:
    """Who does it and why, and the key that makes it idempotent."""

    operator: str
    reason: str
    idempotency_key: str | None  # None: derive one per shard from the content
    precondition: str | None


def identity(operator: str | None, reason: str, key: str | None,
             precondition: str | None) -> Identity:
    from nereus.errors import UsageError

    if not reason.strip():
        raise UsageError("--reason must say why: it is recorded in the Shard Log with your "
                         "identity (the audit trail)")
    who = operator if operator is not None else _user()
    if not who.strip():
        raise UsageError("--as must name the operator")
    if key is not None and not key.strip():
        raise UsageError("--idempotency-key must not be blank")
    return Identity(who, reason, key, precondition)


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        return os.environ.get("USER", "") or f"uid-{os.getuid()}"


Build = Callable[["ShardId"], "OperatorMutation"]


def every_shard(env: Env, only: Sequence[str] | None = None) -> list[ShardId]:
    """The shards a lane mutation goes to: all of them, or the ``--shard`` ones."""
    from nereus.shard import ShardId

    if only:
        return [env.shard(text) for text in only]
    return [ShardId(route.name, partition) for route in env.config.routes.values()
            for partition in range(route.partitions)]


@dataclass
class Planned:
    """One mutation planned on its shards: the document to print and the plans to append."""

    doc: dict[str, Any]
    plans: list[tuple[ShardId, dict[str, Any]]]
    destructive: bool
    running: bool


def run(env: Env, *, build: Build, shards: Sequence[ShardId], who: Identity,
        dry_run: bool, yes: bool, wait: bool) -> None:
    """Plan ``build(shard)`` on every shard, confirm, append, report (see the module doc)."""
    planned = plan(env, build=build, shards=shards, who=who, dry_run=dry_run, wait=wait)
    if not dry_run:
        if planned.destructive and not yes:
            confirm(env, [planned])
        commit(env, planned, wait=wait)
    report(env, planned.doc)
    if failed(planned.doc):
        raise typer.Exit(1)
    not_known(env, [planned.doc], wait=wait and not dry_run)


def plan(env: Env, *, build: Build, shards: Sequence[ShardId], who: Identity,
         dry_run: bool, wait: bool, ahead: Sequence[Planned] = ()) -> Planned:
    """Plan the mutation on every shard; with ``dry_run`` the document says what would be.

    ``ahead``: mutations of the same submission that go first; each shard's plan starts
    from the state they leave (see ``nereus.operator.plan_mutation``).
    """
    import msgspec

    from nereus.errors import EngineUnreachable
    from nereus.operator import is_destructive, mutation_target

    running = env.engine_running()
    if wait and not dry_run and not running:
        raise EngineUnreachable(
            f"--wait needs the engine, and none runs on {env.home}",
            hint="start it with `nereus engine start`, or drop --wait for the QUEUED receipt")
    plans: list[tuple[ShardId, dict[str, Any]]] = []
    first: OperatorMutation | None = None
    for shard in shards:
        # a blank key is derived by the planner, which sees earlier results
        mutation = msgspec.structs.replace(build(shard), idempotency_key=who.idempotency_key or "")
        first = first or mutation
        before = [p["data"] for item in ahead for s, p in item.plans
                  if s == shard and p["earlier"] is None]
        plans.append((shard, _plan(env, shard, mutation, running, before)))
    assert first is not None
    doc: dict[str, Any] = {
        "kind": _kind(first), "target": mutation_target(first), "operator": who.operator,
        "operator_reason": who.reason,
        "idempotency_key": plans[0][1]["idempotency_key"] if len(plans) == 1 else None,
        "dry_run": dry_run, "impact": _total_impact(plans), "receipts": [],
    }
    if dry_run:
        doc["receipts"] = [_would(shard, p) for shard, p in plans]
        doc["result"] = "DRY_RUN"
    return Planned(doc, plans, is_destructive(first), running)


def commit(env: Env, planned: Planned, *, wait: bool) -> None:
    """Append what was planned (nothing for a shard where it already applied)."""
    doc = planned.doc
    doc["receipts"] = _append(env, planned.plans, wait=wait)
    doc["result"] = _overall(doc["receipts"])


def failed(doc: dict[str, Any]) -> bool:
    """True when the answer is "no": rejected, stale, or (dry run) would be."""
    if doc["dry_run"]:
        return any(r["would_result"] != "APPLIED" for r in doc["receipts"])
    return doc["result"] in ("REJECTED", "STALE")


def not_known(env: Env, docs: Sequence[dict[str, Any]], *, wait: bool) -> None:
    """Under --wait, a shard still QUEUED means the result is not known yet: exit 6."""
    from nereus.errors import ExitCode

    queued = [r for doc in docs for r in doc["receipts"] if r.get("evidence") == "QUEUED"]
    if not wait or not queued:
        return
    key = queued[0].get("idempotency_key")
    env.output.err.print(
        f"queued; result not known yet on {len(queued)} shard(s): durable in the Shard Log "
        f"but not applied in time (see `nereus engine status`); ask later with `nereus "
        f"command show {key}`", markup=False, highlight=False)
    raise typer.Exit(int(ExitCode.RESULT_NOT_KNOWN))


def _kind(mutation: OperatorMutation) -> str:
    from nereus.records.codec import kind_of

    return kind_of(mutation)


# planning ---------------------------------------------------------------------------
def _plan(env: Env, shard: ShardId, mutation: OperatorMutation, running: bool,
          before: list[str]) -> dict[str, Any]:
    from nereus.records import encode

    if running:
        answer: dict[str, Any] = env.admin().post("/v1/mutations/plan", {
            "shard": str(shard), "data": base64.b64encode(encode(mutation)).decode(),
            "before": before})
        return answer
    from nereus.operator import plan_mutation
    from nereus.operator.plan import next_position, plan_document
    from nereus.state.store import ShardStore
    from nereus.state.view import EmptyView

    path = env.layout.shard_state(shard)
    now_ms = int(time.time() * 1000)
    ahead = [base64.b64decode(data) for data in before]
    if not (path / "CURRENT").exists():  # never applied anything yet
        tail = _unapplied(env, shard, 0)
        plan = plan_mutation(EmptyView(), mutation, shard=str(shard), broker_ms=now_ms,
                             limits=env.config.limits, before=tail + ahead)
        return plan_document(plan)
    with ShardStore.open(path, read_only=True) as store:
        tail = _unapplied(env, shard, next_position(store))
        plan = plan_mutation(store, mutation, shard=str(shard), broker_ms=now_ms,
                             limits=env.config.limits, before=tail + ahead)
        return plan_document(plan)


def _unapplied(env: Env, shard: ShardId, position: int) -> list[bytes]:
    """Records the log holds past the database's applied position (the engine is down).

    The mutation will be applied after them, so it is planned against the state they
    leave: a message scheduled a moment ago and not yet applied is there to break.
    """
    from nereus.errors import NotFound

    try:
        log = env.shard_log(shard, create=False)
    except NotFound:
        return []
    out: list[bytes] = []
    while True:
        records = log.read(position, 10_000)
        if not records:
            return out
        out += [record.payload for record in records]
        position = records[-1].position + 1


def _total_impact(plans: list[tuple[ShardId, dict[str, Any]]]) -> dict[str, Any]:
    """The shards' impacts added up: lanes per shard, message transitions summed."""
    transitions: dict[str, int] = {}
    lanes: list[dict[str, Any]] = []
    attempts: list[dict[str, Any]] = []
    paused: list[str] = []
    for shard, plan in plans:
        impact = plan["impact"]
        for name, count in impact["message_transitions"].items():
            transitions[name] = transitions.get(name, 0) + count
        lanes += [{"shard": str(shard), **lane} for lane in impact["lanes"]]
        attempts += [{"shard": str(shard), **a} for a in impact["attempts"]]
        if "paused" in impact:
            paused.append(f"{shard}: {'paused' if impact['paused'] else 'resumed'}")
    total: dict[str, Any] = {
        "shards": len(plans),
        "messages_changed": sum(transitions.values()),
        "message_transitions": dict(sorted(transitions.items())),
        "messages_held": sum(lane["scheduled"] for lane in lanes
                             if lane["changed"].get("gate", {}).get("to") == "CLOSED"),
        "lanes": lanes,
        "attempts": attempts,
    }
    if paused:
        total["shard_pause"] = paused
    return total


def _would(shard: ShardId, plan: dict[str, Any]) -> dict[str, Any]:
    would, earlier = plan["would"], plan["earlier"]
    receipt = {
        "shard": str(shard), "source_position": None, "broker_time": None,
        "evidence": "DRY_RUN", "precondition_digest": plan["precondition_digest"],
        "idempotency_key": plan["idempotency_key"],
        "would_result": earlier["status"] if earlier else would["status"],
        "would_reason": (earlier or would)["reason"],
        "would_detail": (earlier or would)["detail"],
        "duplicate_of": earlier["position"] if earlier else None,
    }
    return receipt


# confirmation -----------------------------------------------------------------------
def confirm(env: Env, planned: Sequence[Planned]) -> None:
    """Ask on the terminal before destructive mutations; refuse (exit 2) without one."""
    from nereus.errors import UsageError

    what = "; ".join(f"{_describe(p.doc['kind'], p.doc['target'])} on {len(p.plans)} shard(s)"
                     for p in planned if p.destructive)
    if not what:
        return
    if not sys.stdin.isatty():
        raise UsageError(
            f"{what}: needs confirmation and there is no terminal to ask on",
            hint="pass --yes to confirm in a script, or --dry-run to see what would change")
    import copy

    from nereus.cli.output import terminal_safe

    for p in planned:
        _print_impact(env.output.err, terminal_safe(copy.deepcopy(p.doc)))
    if not typer.confirm(f"{what}?", default=False, err=True):
        env.output.err.print("not confirmed: nothing was written")
        raise typer.Exit(1)


def _describe(kind: str, target: str) -> str:
    verbs = {"LANE_GATE": "Change the gate of", "LANE_CONFIG": "Change the policy of",
             "ATTEMPT_RESOLVE": "Resolve", "MESSAGE_BREAK": "Break",
             "SHARD_PAUSE": "Pause", "SHARD_RESUME": "Resume"}
    return f"{verbs.get(kind, kind)} {target}"


# appending --------------------------------------------------------------------------
def _append(env: Env, plans: list[tuple[ShardId, dict[str, Any]]], *,
            wait: bool) -> list[dict[str, Any]]:
    """Append what each shard still needs through the home's ``CommandSink`` (nothing where
    the same command was already applied: its first result is the receipt)."""
    from nereus.client import Prepared
    from nereus.records import decode
    from nereus.records.codec import DecodeFailure, kind_of

    receipts: list[dict[str, Any]] = []
    pending: list[tuple[int, Prepared]] = []
    for shard, plan in plans:
        earlier = plan["earlier"]
        base = {"shard": str(shard), "precondition_digest": plan["precondition_digest"],
                "idempotency_key": plan["idempotency_key"]}
        if earlier is not None:  # the same command already applied: no-op, same result
            receipts.append({**base, "source_position": earlier["position"],
                             "broker_time": None, "evidence": "APPLIED",
                             **_result_fields(earlier), "duplicate_of": earlier["position"]})
            continue
        receipts.append(base)
        data = base64.b64decode(plan["data"])
        record = decode(data)
        assert not isinstance(record, DecodeFailure), record  # we encoded it ourselves
        pending.append((len(receipts) - 1, Prepared(shard, kind_of(record),
                                                    plan["idempotency_key"], None, data,
                                                    record)))
    if not pending:
        return receipts
    answers = env.command_sink(wait=wait).submit([p for _, p in pending], wait=wait)
    for (index, _), answer in zip(pending, answers, strict=True):
        receipts[index].update({
            "source_position": answer.source_position, "broker_time": answer.broker_time,
            "evidence": answer.evidence, "result": answer.result, "reason": answer.reason,
            "detail": answer.detail, "duplicate_of": answer.duplicate_of})
    return receipts


def _result_fields(result: dict[str, Any]) -> dict[str, Any]:
    return {"result": result["status"], "reason": result["reason"], "detail": result["detail"]}


def _overall(receipts: list[dict[str, Any]]) -> str:
    results = {r.get("result") for r in receipts}
    for verdict in ("STALE", "REJECTED"):
        if verdict in results:
            return verdict
    return "QUEUED" if None in results else "APPLIED"


# reporting --------------------------------------------------------------------------
def report(env: Env, doc: dict[str, Any]) -> None:
    env.output.emit(doc, lambda out: print_document(out, doc))


def print_document(out: Console, doc: dict[str, Any]) -> None:
    """The human rendering of one mutation's document."""
    from nereus.cli.output import safe_markup as escape

    head = escape(_describe(doc["kind"], doc["target"]))
    out.print(f"{'DRY RUN: ' if doc['dry_run'] else ''}{head} "
              f"[dim](by {escape(doc['operator'])}: {escape(doc['operator_reason'])})[/dim]")
    _print_impact(out, doc)
    for r in doc["receipts"]:
        out.print(_receipt_line(r))
    if doc["dry_run"]:
        out.print("nothing was written (--dry-run)")


def _receipt_line(r: dict[str, Any]) -> str:
    if r["evidence"] == "DRY_RUN":
        why = f" ({r['would_reason']}: {r['would_detail']})" if r["would_reason"] else (
            f": {r['would_detail']}" if r["would_detail"] else "")
        again = f" (already applied at position {r['duplicate_of']}: nothing to do)" \
            if r["duplicate_of"] is not None else ""
        return (f"  {r['shard']}: would be {r['would_result']}{why}{again}  "
                f"(precondition {r['precondition_digest']})")
    if r["evidence"] == "QUEUED":
        return (f"  {r['shard']}: queued at position {r['source_position']}  (QUEUED: "
                "durable in the Shard Log, applied when the engine runs)")
    why = f" ({r['reason']}: {r['detail']})" if r.get("reason") else (
        f": {r['detail']}" if r.get("detail") else "")
    again = " (no-op: this command was already applied)" if r.get("duplicate_of") is not None \
        else ""
    return f"  {r['shard']}: {r['result']} at position {r['source_position']}{why}{again}"


def _print_impact(out: Console, doc: dict[str, Any]) -> None:
    impact = doc["impact"]
    for lane in impact["lanes"]:
        changes = ", ".join(f"{name} {c['from']} -> {c['to']}"
                            for name, c in lane["changed"].items()) or "no policy change"
        out.print(f"  lane {lane['lane']} on {lane['shard']}: {changes}; "
                  f"{lane['scheduled']} scheduled, {lane['in_flight']} in flight")
    if impact["messages_changed"]:
        moves = ", ".join(f"{n} {t}" for t, n in impact["message_transitions"].items())
        out.print(f"  messages: {moves}")
    for a in impact["attempts"]:
        out.print(f"  attempt {a['attempt_id']} ({a['delay_message_id']}) on {a['shard']}: "
                  f"{a['from']} -> {a['to']}")
    for line in impact.get("shard_pause", []):
        out.print(f"  shard {line}")
