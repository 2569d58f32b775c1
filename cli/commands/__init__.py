"""One module per command group; each command is thin and renders through ``Output``."""
