"""The chaos instrument (issue 37 §1): a seeded workload, nemeses, a typed history of what
clients, consumers and shards saw, and a checker of the seeds' invariants over it."""
