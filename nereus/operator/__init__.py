"""Operator mutations as an operator plans them: idempotency keys, preconditions, dry runs.

Pure like the rest of the core: the CLI, the admin API and the dashboard all plan a
mutation with these functions against whatever view of the shard they have (the live
store through the engine, or the database opened read-only), so a dry run and the real
thing agree by construction.
"""

from nereus.operator.intent import derive_idempotency_key, is_destructive, mutation_target
from nereus.operator.plan import MutationPlan, PlanDocument, plan_mutation

__all__ = ["MutationPlan", "PlanDocument", "derive_idempotency_key", "is_destructive",
           "mutation_target", "plan_mutation"]
