"""Lane publishers: one thread per lane drives its destination (never the state store), each
destination call under a deadline on a thread of its own."""
