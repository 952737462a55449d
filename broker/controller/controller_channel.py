"""ControllerChannel: how a broker reaches the active controller (Kafka's
NodeToControllerChannelManager): the controller in this process when it is the active one,
else the quorum's leader over the network. Used for registration and heartbeats, ISR
changes, controlled shutdown and forwarded topic changes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from purgatory.broker.controller.controller_apis import ControllerApis
from purgatory.protocol import inter_broker_messages as ib
from purgatory.protocol.api import SCHEMAS, ApiKey, latest_version
from purgatory.protocol.errors import ErrorCode, KafkaError

# (destination node, API key, request, timeout ms) -> the response
Send = Callable[[int, ApiKey, Any, int], Awaitable[Any]]

_encoder = msgspec.msgpack.Encoder()


class ControllerChannel:
    def __init__(
        self,
        node_id: int,
        apis: ControllerApis,
        leader: Callable[[], int],
        send: Send,
        timeout_ms: Callable[[], int],
    ) -> None:
        self.node_id = node_id
        self.apis = apis
        self.leader = leader  # the quorum leader this node knows, -1 if none
        self._send = send
        self.timeout_ms = timeout_ms

    def controller_id(self) -> int:
        return self.leader()

    async def call(self, key: ApiKey, request: Any, timeout_ms: int | None = None) -> Any:
        """The active controller's answer. Raises KafkaError(NOT_CONTROLLER) when no
        active controller is known, ConnectionError or KafkaError when it cannot be
        reached."""
        if self.apis.active:
            return await self.apis.serve(key, request)
        leader = self.leader()
        if leader < 0 or leader == self.node_id:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "no active controller is known yet")
        return await self._send(leader, key, request, timeout_ms or self.timeout_ms())

    async def forward(self, key: ApiKey, request: Any, timeout_ms: int) -> Any:
        """A client's topic change (CreateTopics, DeleteTopics, CreatePartitions) served
        by the active controller: here, or sent to it in an Envelope."""
        if self.apis.active:
            assert self.apis.controller is not None
            return await self.apis.topic_change(self.apis.controller, key, request)
        version = latest_version(key)
        envelope = ib.EnvelopeRequest(int(key), version, _encoder.encode(request))
        response: ib.EnvelopeResponse = await self.call(ApiKey.ENVELOPE, envelope, timeout_ms)
        if response.error_code or response.response_data is None:
            raise KafkaError(response.error_code or ErrorCode.UNKNOWN_SERVER_ERROR, "not forwarded")
        return msgspec.msgpack.decode(response.response_data, type=SCHEMAS[(key, version)][1])
