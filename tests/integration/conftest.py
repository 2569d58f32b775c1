"""Fixtures shared by the integration tests."""

from tests.integration.file_segments import log_dir, open_file_log  # noqa: F401
from tests.integration.secure_services import (  # noqa: F401
    etcd_secure,
    etcd_secure_service,
    kafka_secure,
    kafka_secure_service,
    oxia_secure,
    oxia_secure_service,
    pulsar_secure,
    pulsar_secure_service,
    s3_secure,
    s3_secure_service,
)
from tests.integration.stores import store_from  # noqa: F401
