"""One shard's owner: the loop (apply -> outcomes -> schedule on one thread) and the parts it is
built from: apply step, admissions, outbox, recovery, ownership, retention sweep and backfill,
checkpoints, progress, status, explain, idle waits, lane policy."""
