"""The scheduler: due-work discovery, the gates of seed 000 section 1, two-level DRR across
lanes, bounded permits, and reversible local Claims."""
