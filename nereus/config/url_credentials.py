"""An address carries no user and no password.

``etcd://USER:PASSWORD@HOST:PORT/CLUSTER`` (or a broker, admin API or object store address
written so) would put a secret where every message, status document, ``doctor`` check and
the node's ``nereus.toml`` shows the address, so such an address is refused before it is
used or kept: a coordinator URL given on the command line is shown ``redacted`` (``***@``
for the user part); a setting of ``nereus.toml`` is named, not shown. Each refusal names
the settings that take the user and password instead.
"""

from __future__ import annotations

from typing import Final

from nereus.errors import UsageError

WHERE_CREDENTIALS_GO: Final = (
    "give the user as --username (or [cluster] username) and the password in a 0600 file as "
    "--password-file (or [cluster] password_file, or password_env); write the URL as "
    "SCHEME://HOST:PORT/CLUSTER")


# the settings of nereus.toml that hold an address (the [kafka.NAME] OIDC token endpoint too)
ADDRESS_KEYS: Final = ("bootstrap", "service_url", "admin_url", "endpoint", "coordinator",
                       "sasl.oauthbearer.token.endpoint.url")


def redacted(url: str) -> str:
    """``url`` with any ``USER[:PASSWORD]@`` before its host replaced by ``***@``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return f"{scheme}{sep}{authority}{slash}{path}"


def has_credentials(url: str) -> bool:
    """``url`` names a user or password before its host."""
    return redacted(url) != url


def refuse_credentials(url: str) -> None:
    """``UsageError`` (the URL shown redacted) when ``url`` names a user or password."""
    shown = redacted(url)
    if shown != url:
        raise UsageError(f"the coordinator URL {shown!r} carries a user or password "
                         "(USER:PASSWORD@): a secret is never written into a URL",
                         hint=WHERE_CREDENTIALS_GO)
