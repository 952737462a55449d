"""The simulated network between simulated processes: every request and answer takes a
seeded random delay, may be reordered, and is lost on a link that is cut (one way or
both). A request to a process that is down fails fast (the port refuses, as a killed
process's does); a lost request or answer leaves the sender waiting out its timeout, as
a partition does to TCP.

Handlers are whatever a process registered: a call that returns the answer, or an
awaitable of it (a long-polled fetch), run on the receiving process's loop.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from purgatory.protocol.errors import ErrorCode, KafkaError
from tests.simulation.sim_loop import Simulation

# (source node, api key, api version, request) -> the answer, or an awaitable of it
Handler = Callable[[int, Any, int, Any], Any]


class SimNetwork:
    def __init__(
        self, sim: Simulation, min_delay_ms: float = 0.1, max_delay_ms: float = 3.0
    ) -> None:
        self.sim = sim
        self.min_delay_ms = min_delay_ms
        self.max_delay_ms = max_delay_ms
        self.handlers: dict[int, Handler] = {}
        self.incarnations: dict[
            int, int
        ] = {}  # node -> its current run (answers to older runs are lost)
        # (from, to): what goes that way waits until the link heals (TCP retransmitting
        # through a partition) ...
        self.cut: set[tuple[int, int]] = set()
        # ... or is lost for good (a one-way packet loss that ends the connection).
        self.lossy: set[tuple[int, int]] = set()
        self._held: list[tuple[tuple[int, int], Callable[[], None]]] = []
        self.sent = 0
        self.lost = 0
        # Told of every answer as its node makes it: (node, api key, request, answer).
        self.on_answer: Callable[[int, Any, Any, Any], None] | None = None

    def attach(self, node_id: int, handler: Handler) -> None:
        self.handlers[node_id] = handler
        self.incarnations[node_id] = self.incarnations.get(node_id, 0) + 1

    def detach(self, node_id: int) -> None:
        self.handlers.pop(node_id, None)

    def _delay(self) -> float:
        return self.sim.rng.uniform(self.min_delay_ms, self.max_delay_ms) / 1000

    async def send(
        self, source: int, destination: int, key: Any, request: Any, timeout_ms: int, version: int
    ) -> Any:
        """What a process's channel calls: the answer, or KafkaError(REQUEST_TIMED_OUT), or
        ConnectionError when the destination is down."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()
        incarnation = self.incarnations.get(source, 0)
        self.sent += 1
        self.sim.at(
            self._delay(),
            lambda: self._arrive(source, incarnation, destination, key, version, request, answer),
        )
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                return await answer
        except TimeoutError:
            raise KafkaError(
                ErrorCode.REQUEST_TIMED_OUT, f"no answer from node {destination}"
            ) from None

    def _alive(self, node: int, incarnation: int) -> bool:
        return node in self.handlers and self.incarnations.get(node) == incarnation

    def _arrive(
        self,
        source: int,
        incarnation: int,
        destination: int,
        key: Any,
        version: int,
        request: Any,
        answer: asyncio.Future[Any],
    ) -> None:
        if self._blocked(
            (source, destination),
            lambda: self._arrive(source, incarnation, destination, key, version, request, answer),
        ):
            return
        if destination not in self.handlers:
            # Refused at once: the answer is the refusal, back over the same link.
            self._reply(
                destination,
                source,
                incarnation,
                answer,
                ConnectionRefusedError(f"node {destination} is down"),
            )
            return
        handler = self.handlers[destination]
        served = self.incarnations[destination]

        def handle() -> None:
            try:
                result = handler(source, key, version, request)
            except Exception as exc:
                self.sim.errors.append(f"node {destination} failed on {key!r}: {exc!r}")
                return
            if inspect.isawaitable(result):
                pending = asyncio.ensure_future(result)

                def done(task: asyncio.Future[Any]) -> None:
                    if task.cancelled():
                        return
                    exc = task.exception()
                    if exc is not None:
                        self.sim.errors.append(f"node {destination} failed on {key!r}: {exc!r}")
                        return
                    if self._alive(destination, served):
                        self._answered(destination, key, request, task.result())
                        self._reply(destination, source, incarnation, answer, task.result())

                pending.add_done_callback(done)
            else:
                self._answered(destination, key, request, result)
                self._reply(destination, source, incarnation, answer, result)

        self.sim.run_in(destination, handle)

    def _blocked(self, link: tuple[int, int], deliver: Callable[[], None]) -> bool:
        """Whether a message on ``link`` cannot go now: lost, or held for the heal."""
        if link in self.lossy:
            self.lost += 1
            return True
        if link in self.cut:
            self._held.append((link, deliver))
            return True
        return False

    def heal(self, links: set[tuple[int, int]]) -> None:
        """Links work again: what waited on them goes (each after a network delay)."""
        self.cut -= links
        self.lossy -= links
        waiting, self._held = self._held, []
        for link, deliver in waiting:
            if link in self.cut:
                self._held.append((link, deliver))
            else:
                self.sim.at(self._delay(), deliver)

    def _answered(self, node: int, key: Any, request: Any, result: Any) -> None:
        if self.on_answer is not None:
            self.on_answer(node, key, request, result)

    def _reply(
        self,
        source: int,
        destination: int,
        incarnation: int,
        answer: asyncio.Future[Any],
        result: Any,
    ) -> None:
        def arrive() -> None:
            if self._blocked((source, destination), arrive):
                return
            if not self._alive(destination, incarnation) or answer.done():
                return

            def resolve() -> None:
                if answer.done():
                    return
                if isinstance(result, BaseException):
                    answer.set_exception(result)
                else:
                    answer.set_result(result)

            self.sim.run_in(destination, resolve)

        self.sim.at(self._delay(), arrive)
