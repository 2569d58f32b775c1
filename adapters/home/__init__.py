"""One home on disk: its lock and pid file, private and durable files, route secrets and the
allocator settings of its engine process."""
