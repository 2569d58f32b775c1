"""One engine process: the Engine that owns a home's shards, lanes and background threads (the
evidence scan, payload collection, catch-up from checkpoints), and what it reports of them
(log heads) and changes in them (lane changes)."""
