"""What works on a home's files without asking a running engine (the engine runs the same
code where it needs it): the shard runner and replay, verification, checkpoints (take,
restore, catalog), large payloads and their collection, continuity checks, command lookup."""
