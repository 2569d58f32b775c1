"""The admin socket: HTTP/1.1 + JSON over ``<home>/run/admin.sock`` (mode 0600)."""
