"""One home on disk: its lock and pid file, private and durable files, route secrets, the
allocator settings, and the engine process started and stopped from outside it."""
