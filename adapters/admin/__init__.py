"""The admin socket from the client's side: the client the CLI and the TUI use, the request
and answer bodies it shares with the engine, and the engine process started and stopped
from outside it (``engine start`` / ``engine stop``)."""
