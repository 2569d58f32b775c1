"""A coordinator URL carries no user and no password.

``etcd://USER:PASSWORD@HOST:PORT/CLUSTER`` would put a secret where every message, status
document and the node's ``nereus.toml`` shows the URL, so such a URL is refused before it
is used or kept, and every message shows it ``redacted`` (``***@`` for the user part),
naming the settings that take the user and password instead.
"""

from __future__ import annotations

from typing import Final

from nereus.errors import UsageError

WHERE_CREDENTIALS_GO: Final = (
    "give the user as --username (or [cluster] username) and the password in a 0600 file as "
    "--password-file (or [cluster] password_file, or password_env); write the URL as "
    "SCHEME://HOST:PORT/CLUSTER")


def redacted(url: str) -> str:
    """``url`` with any ``USER[:PASSWORD]@`` before its host replaced by ``***@``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return f"{scheme}{sep}{authority}{slash}{path}"


def refuse_credentials(url: str) -> None:
    """``UsageError`` (the URL shown redacted) when ``url`` names a user or password."""
    shown = redacted(url)
    if shown != url:
        raise UsageError(f"the coordinator URL {shown!r} carries a user or password "
                         "(USER:PASSWORD@): a secret is never written into a URL",
                         hint=WHERE_CREDENTIALS_GO)
