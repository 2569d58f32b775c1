"""The admin socket from the client's side: the client the CLI and the TUI use, and the
request and answer bodies it shares with the engine."""
