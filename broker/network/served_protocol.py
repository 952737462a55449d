"""What a port speaks: a codec and the API handlers behind it (``ServedProtocol``), and a
protocol whose code loads on first use (``LazyProtocol``: Kafka's, whose layer and
schemas take about 0.03 s of CPU and 3 MB to import in a broker process, 0.15-0.25 s and
11 MB where hypothesis can be imported (see ``broker.main.keep_unused_out``); a broker
nobody reaches with a Kafka client never pays either)."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from purgatory.broker.network.request_channel import Codec

Handler = Callable[[Any, int], Any]


class ServedProtocol(NamedTuple):
    """A protocol the port speaks: its codec and its API handlers by api key."""

    codec: Codec
    handlers: Mapping[int, Handler]


class LazyProtocol:
    """``modules`` are imported on a thread when the first connection needs them (the
    event loop keeps serving everyone else meanwhile); then ``build`` makes the protocol
    on the loop, once."""

    def __init__(self, modules: tuple[str, ...], build: Callable[[], ServedProtocol]) -> None:
        self.modules = modules
        self.build = build
        self.served: ServedProtocol | None = None
        self._loading: asyncio.Future[ServedProtocol] | None = None

    def load(self) -> asyncio.Future[ServedProtocol]:
        """The protocol, when it is ready (the same future for every caller)."""
        if self._loading is None:
            loop = asyncio.get_running_loop()
            self._loading = loop.create_future()
            loop.run_in_executor(None, self.import_modules).add_done_callback(self._imported)
        return self._loading

    def import_modules(self) -> None:
        for module in self.modules:
            importlib.import_module(module)

    def _imported(self, done: asyncio.Future[None]) -> None:
        assert self._loading is not None
        try:
            done.result()
            self.served = self.build()
        except Exception as exc:  # an install without them: each waiting connection is told
            self._loading.set_exception(exc)
            return
        self._loading.set_result(self.served)
