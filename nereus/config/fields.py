"""The field types and the default that several tables of ``nereus.toml`` share.

A table's ranges live in its field types (``Annotated[int, Meta(ge=1)]``), so msgspec
checks them when the file is converted and the error names the key.
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

DEFAULT_RETENTION: Final = "7d"  # a lane's retention and dedup_window unless it says otherwise

NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]
