"""The image, built once per session with podman (deploy/container/build.sh), for tests
that run it as users do: `podman run`, podman-compose, a client on the host."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.container.engine import IMAGE, Podman, containers_conf, engine_problem


@pytest.fixture(scope="session")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Podman:
    problem = engine_problem()
    if problem is not None:
        # On a CI machine that could install it (Debian, root), a missing engine is a
        # failure of the set-up, not a reason to skip.
        if os.environ.get("CI") and os.geteuid() == 0 and shutil.which("apt-get"):
            pytest.fail(
                f"container tests: {problem}; make system-packages should have installed it"
            )
        pytest.skip(f"container tests: {problem}")
    return Podman(containers_conf(tmp_path_factory.mktemp("podman")))


@pytest.fixture(scope="session")
def image(podman: Podman) -> Iterator[str]:
    podman.build(IMAGE)
    yield IMAGE
