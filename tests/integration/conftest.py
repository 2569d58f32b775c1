"""Fixtures shared by the integration tests."""

from tests.integration.stores import store_from  # noqa: F401
