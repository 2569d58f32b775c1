"""Reading a secret ``nereus.toml`` refers to (``NAME_file = PATH`` or ``NAME_env = VAR``).

A secret file must be private to the engine's user: owned by it (the effective uid) and
with no permission for group or others (0600 or 0400), else it is refused with its path,
mode or owner and the command that fixes it, and the secret is not read. A file is read
each time a client is made, so a rotated password is used from the next connection on.

Every value read is remembered (``redact``) so that a message built from a client's error
can be cleaned of it before it is logged or shown: no secret reaches a log line, a
``--json`` document, ``doctor`` or an error message.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path
from typing import Final

from nereus.errors import ConfigError

_READ: set[str] = set()  # values read by this process (redact removes them from text)
_SHOWN: Final = "***"


def read_secret(what: str, *, file: str | None, env: str | None,
                home: Path | None = None) -> str | None:
    """The secret ``what`` (``"[kafka.prod] sasl.password"``) from its file or environment
    variable; None when neither is given. A relative path is the home's."""
    if file is not None:
        path = Path(file).expanduser()
        if not path.is_absolute() and home is not None:
            path = home / path
        value = _from_file(what, path)
    elif env is not None:
        found = os.environ.get(env)
        if found is None or not found.strip():
            raise ConfigError(f"{what}: the environment variable {env} is not set for the "
                              "engine", hint=f"export {env}=... in the environment the engine "
                                             "starts from (or give the secret by a file)")
        value = found.strip()
    else:
        return None
    if len(value) >= 4:
        _READ.add(value)
    return value


def _from_file(what: str, path: Path) -> str:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"{what}: the secret file {path} does not exist",
                          hint="write it (mode 0600, owned by the engine's user) or fix the "
                               "path") from None
    except OSError as exc:
        raise ConfigError(f"{what}: the secret file {path} cannot be read: {exc.strerror}",
                          hint=f"make {path} readable by the engine's user") from None
    check_secret_file(what, path, info)
    try:
        value = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what}: the secret file {path} cannot be read: {exc}",
                          hint=f"make {path} a text file readable by the engine's user") \
            from None
    if not value:
        raise ConfigError(f"{what}: the secret file {path} is empty",
                          hint="write the secret into it (one line)")
    return value


def check_secret_file(what: str, path: Path, info: os.stat_result) -> None:
    """Refuse ``path`` unless the engine's user owns it and nobody else may read it."""
    user = os.geteuid()
    if info.st_uid != user:
        raise ConfigError(f"{what}: the secret file {path} is owned by {_user(info.st_uid)}, "
                          f"not by {_user(user)} that runs the engine",
                          hint=f"chown {_user(user)} {path}")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise ConfigError(f"{what}: the secret file {path} has mode {mode:04o}: other users "
                          "may read it", hint=f"chmod 600 {path}")


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def home_path(value: str | None, home: Path | None) -> str | None:
    """A file ``nereus.toml`` names (a CA, a certificate, a key): a relative path is the
    home's, as a secret file's is."""
    if value is None:
        return None
    path = Path(value).expanduser()
    return str(home / path) if home is not None and not path.is_absolute() else str(path)


def redact(text: str) -> str:
    """``text`` without any secret this process has read (each shown as ``***``)."""
    for value in sorted(_READ, key=len, reverse=True):
        if value in text:
            text = text.replace(value, _SHOWN)
    return text
