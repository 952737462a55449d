from __future__ import annotations

import signal
from collections.abc import AsyncIterator

import pytest

from purgatory.broker.ops.structured_logging import configure_logging
from purgatory.broker.server import Broker
from tests.support import running_cluster

configure_logging("console", "WARNING")

# A suite started in the background of a shell without job control (`make test &`) begins
# with Ctrl-C ignored, and every process it starts inherits that: the tests that send a
# child SIGINT would wait for it in vain. Take Ctrl-C back, as a terminal gives it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    async with running_cluster(1) as brokers:
        yield brokers[0]


@pytest.fixture
async def cluster3() -> AsyncIterator[list[Broker]]:
    async with running_cluster(3) as brokers:
        yield brokers


@pytest.fixture(scope="session")
def spark_ready() -> None:
    """Spark tests need Java 17+. Without it they skip on a developer machine (make test
    says how to install it) and fail under CI, which must run them."""
    import os

    from purgatory.experiments.analyze import java_problem

    problem = java_problem()
    if problem is None:
        return
    message = f"Spark needs a Java 17+ runtime: {problem}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI must run the Spark tests)")
    pytest.skip(message)
