"""Test vectors of the Command Topic wire format (docs/wire.md): inputs and the exact bytes,
partition and command id a producer in any language must produce."""
