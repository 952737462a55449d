from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from broker.logs import configure_logging
from broker.server import Broker
from tests.support import running_cluster

configure_logging("console", "WARNING")


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    async with running_cluster(1) as brokers:
        yield brokers[0]


@pytest.fixture
async def cluster3() -> AsyncIterator[list[Broker]]:
    async with running_cluster(3) as brokers:
        yield brokers
