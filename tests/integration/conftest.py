"""Fixtures shared by the integration tests."""

from tests.integration.file_segments import log_dir, open_file_log  # noqa: F401
from tests.integration.secure_services import kafka_secure, kafka_secure_service  # noqa: F401
from tests.integration.stores import store_from  # noqa: F401
