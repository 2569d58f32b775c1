"""``doctor`` on a cluster node: do the live nodes hold the keys the cluster's records name?

Each live node says which keys it holds (``NodeKeys``: its sealing keys' fingerprints, each
route's evidence key generation). A warning (never a failure: the nodes keep working) when
a node does not hold the sealing key a route's keys are sealed under (after
``cluster reseal-evidence-keys``: it must be given the new key before it restarts), when
nodes hold different sealing keys, or when a node still signs with an older generation
than the route's once it has had time to take it (``LAG_MS``) or once the grace of the
generation it signs with has ended (evidence it signs no longer verifies elsewhere).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from nereus.cli.context import Env
    from nereus.cli.setup_documents import DoctorCheck
    from nereus.cluster.records import NodeKeys, SealedRouteKey

NAME: Final = "evidence_keys"
LAG_MS: Final = 30_000  # a running node takes a rotation within seconds


def evidence_key_checks(env: Env, now_ms: int) -> list[DoctorCheck]:
    """One check: what every live node holds against the routes' sealed records."""
    from nereus.adapters.cluster.sealed_keys import node_key_reports, sealed_routes
    from nereus.cli.commands.cluster.access import cluster_store
    from nereus.cli.commands.doctor_routes import check
    from nereus.errors import NereusError

    try:
        with cluster_store(env, None) as store:
            records, reports = sealed_routes(store), node_key_reports(store)
    except NereusError as exc:
        return [check(NAME, False, f"the nodes' keys were not read: {exc.message}",
                      exc.hint or "check the [cluster] coordinator", severity="warning")]
    problems = key_problems(records, reports, now_ms)
    if problems:
        return [check(NAME, False, "; ".join(problems),
                      "give each node the cluster's sealing key ([cluster] "
                      "evidence_seal_key_file; `nereus cluster nodes` shows what each "
                      "holds) and see its log for why a key was not applied",
                      severity="warning")]
    held = ", ".join(sorted({r.key_id for r in records.values()})) or "none: no key sealed yet"
    said = f"{len(reports)} live process(es) (nodes and their workers) hold each route's " \
        f"sealing key ({held}) and current evidence key" if reports else \
        "no live node has said which keys it holds"
    return [check(NAME, True, said, severity="warning")]


def key_problems(records: dict[str, SealedRouteKey], reports: dict[str, NodeKeys],
                 now_ms: int) -> list[str]:
    """What a node lacks or lags behind in, one sentence each (fingerprints only)."""
    from nereus.timespec import format_time_ms

    problems: list[str] = []
    current = sorted({r.seal_key_ids[0] for r in reports.values() if r.seal_key_ids})
    if len(current) > 1:
        problems.append(f"the nodes seal with different sealing keys ({', '.join(current)})")
    for node, report in sorted(reports.items()):
        for route, record in sorted(records.items()):
            if route not in report.generations:
                continue
            if report.seal_key_ids and record.key_id not in report.seal_key_ids:
                problems.append(f"node {node} does not hold sealing key {record.key_id} "
                                f"that route {route}'s keys are sealed under (it holds "
                                f"{', '.join(report.seal_key_ids)}): a restart would be "
                                "refused")
            held, newest = report.generations[route], record.current.generation
            previous = None if record.previous is None else record.previous.generation
            ended = held != previous or now_ms >= record.previous_until_ms
            if held < newest and (ended or now_ms - record.current.made_ms > LAG_MS):
                problems.append(
                    f"node {node} signs route {route} with evidence key generation {held}, "
                    f"the route's is {newest}" + (" (evidence it signs no longer verifies "
                    "on the other nodes)" if ended else
                    f" (it verifies until {format_time_ms(record.previous_until_ms)})"))
    return problems
