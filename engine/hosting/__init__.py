"""The host shapes an Engine answers through: the single daemon, the front door with worker
processes, the cluster node; each serves the admin socket (``admin_server``) with an
``AdminEndpoints``."""
