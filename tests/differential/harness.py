"""Differential testing with Apache Kafka as the oracle: run one scenario's exact requests
against a broker, normalise the answers (drop what legitimately differs between two
brokers), and list where two runs' answers differ, path by path.

A scenario (tests/differential/scenarios/) is an async function of a `Client`: every
`call` sends one request (built from plain values, tests/kafka_wire.py's kio schemas) and
records the decoded response under a label, or `CLOSED` if the broker closed the
connection instead of answering (a request before SASL authentication). `normalise` turns a response into plain data:

a. dropped: throttle times, hosts and ports, cluster ids, error *messages* (Kafka's text is
   not part of the contract; the code is), ApiVersions' client-facing extras, and log
   directories' paths and volume sizes;
b. replaced by a symbol in order of first appearance (``<member_id#1>``): member ids,
   producer ids, topic ids, so equal values stay equal and different ones different;
c. decoded: a config list becomes a map by config name; record bytes become (offset,
   timestamp, key, value, headers) lists, an empty or null record set the empty list, a
   partial batch at its end (a size limit cut it; a consumer drops it) left out;
d. kept as they are: error codes (by name), offsets, counts, generations, leader ids,
   structure and order, except the order of group members, of a Produce answer's
   partitions, of SaslHandshake's mechanisms and of a user's SCRAM credentials (a
   broker's hash order): sorted.

`differences(a, b)` lists the paths (``fetch[0].responses[0].partitions[0].high_watermark``)
where two normalised runs differ, with both values.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, classify_field

from purgatory.protocol import kafka_records
from purgatory.protocol.api import ApiKey
from purgatory.protocol.kafka_schemas import request_class
from tests.kafka_wire import KafkaWire

# (a) Fields that legitimately differ between two brokers, dropped wherever they appear.
DROPPED = frozenset(
    {
        "throttle_time",
        "host",
        "port",
        "cluster_id",
        "error_message",
        "message",  # FindCoordinator's per-key error message
        "batch_index_error_message",  # Produce's per-record error message
        "supported_features",
        "finalized_features",
        "finalized_features_epoch",
        "zk_migration_ready",
        # DescribeLogDirs: where a broker keeps its logs, and that volume's size.
        "log_dir",
        "total_bytes",
        "usable_bytes",
        # DescribeTransactions: when the transaction began, by each broker's clock.
        "transaction_start_time",
    }
)
# (b) Random identifiers: each distinct value becomes a symbol, numbered by first appearance.
SYMBOLS = frozenset({"member_id", "leader", "producer_id", "topic_id"})
# Lists whose order is a broker's hash order, not part of the contract: compared sorted.
# (Their ids must have been seen before, in a list of defined order, for stable symbols.)
# SaslHandshake's mechanisms: Kafka's SaslServerAuthenticator lists them in a HashSet's order;
# a user's SCRAM credentials: Kafka's ScramImage keeps them in a HashMap by mechanism.
# A consumer group member's assignment (ConsumerGroupHeartbeat, ConsumerGroupDescribe): Kafka
# lists its topics in a HashMap's order by topic id.
UNORDERED = frozenset(
    {"members", "partition_responses", "mechanisms", "credential_infos", "topic_partitions"}
)

Plain = Any
# What a call records when the broker closes the connection instead of answering.
CLOSED = "<connection closed>"


class Client:
    """One connection to one broker, recording each call's decoded response by label.
    `connect()` opens another connection of the same scenario (a second group member, or
    a connection to another of the broker's listeners by name): its calls are recorded
    beside this one's, in the order they were sent."""

    def __init__(
        self,
        wire: KafkaWire,
        port: int,
        prefix: str,
        responses: list[tuple[str, Any]] | None = None,
        listeners: dict[str, int] | None = None,
    ) -> None:
        self.wire = wire
        self.port = port
        self.listeners = {"PLAINTEXT": port} if listeners is None else listeners
        self.prefix = prefix
        self.responses: list[tuple[str, Any]] = [] if responses is None else responses
        self.others: list[Client] = []

    def topic(self, name: str = "t") -> str:
        """A topic name of this scenario's own (the same on both brokers)."""
        return f"{self.prefix}-{name}"

    async def connect(self, listener: str | None = None, client_id: str = "wire") -> Client:
        """Another connection to the same broker (to ``listener``, by name, if given, its
        requests sent with ``client_id``), recording into this scenario."""
        port = self.port if listener is None else self.listeners[listener]
        wire = await KafkaWire.open(port, client_id)
        other = Client(wire, port, self.prefix, self.responses, self.listeners)
        self.others.append(other)
        return other

    async def closed(self, label: str, timeout_s: float = 1.0) -> bool:
        """Record whether the broker closed this connection within ``timeout_s``."""
        try:
            closed = await self.wire.closed(timeout_s)
        except TimeoutError:
            closed = False
        except ConnectionError:
            closed = True
        self._record(label, closed)
        return closed

    def _record(self, label: str, value: Any) -> int:
        if any(label == seen for seen, _ in self.responses):
            raise ValueError(f"label {label!r} is used twice in one scenario")
        self.responses.append((label, value))
        return len(self.responses) - 1

    async def close(self) -> None:
        for other in self.others:
            await other.close()
        await self.wire.close()

    async def call(
        self,
        label: str,
        api_key: ApiKey,
        version: int,
        view: Callable[[Any], Any] | None = None,
        lenient: bool = False,
        **values: Any,
    ) -> Any:
        """Send one request built from plain values, record and return the response
        (recorded as ``view(response)`` if given: the part of a broker-wide answer that
        belongs to this scenario). ``lenient``: values for fields this version does not
        have are left out (one set of values for every version of an API). A connection
        the broker closes instead of answering is recorded as `CLOSED` (None returned)."""
        slot = self._record(label, None)  # its place: the order the calls were sent
        request = body(api_key, version, lenient, **values)
        try:
            response = await self.wire.call(api_key, version, request)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.responses[slot] = (label, CLOSED)
            return None
        self.responses[slot] = (label, response if view is None else view(response))
        return response

    async def until(
        self,
        api_key: ApiKey,
        version: int,
        done: Callable[[Any], bool],
        timeout_s: float = 30.0,
        **values: Any,
    ) -> Any:
        """Repeat a request (not recorded) until ``done(response)``; fail after the deadline.
        For setup that a broker finishes in its own time (the offsets topic's creation)."""
        deadline = time.monotonic() + timeout_s
        while True:
            response = await self.wire.call(api_key, version, body(api_key, version, **values))
            if done(response):
                return response
            if time.monotonic() > deadline:
                raise AssertionError(f"no acceptable {api_key.name} answer in {timeout_s} s")
            await asyncio.sleep(0.05)  # poll interval, bounded by the deadline


Scenario = Callable[[Client], Awaitable[None]]


async def run(
    scenario: Scenario, name: str, port: int, listeners: dict[str, int] | None = None
) -> list[tuple[str, Plain]]:
    """The scenario's normalised responses from the broker on ``port`` (its PLAINTEXT
    listener; ``listeners``: every listener's port by name, for `Client.connect`)."""
    client = Client(await KafkaWire.open(port), port, name.replace("_", "-"), None, listeners)
    try:
        await scenario(client)
    finally:
        await client.close()
    symbols: dict[str, dict[Any, str]] = {}
    return [(label, normalise(response, symbols)) for label, response in client.responses]


# -- requests from plain values --------------------------------------------------------


def body(api_key: ApiKey, version: int, lenient: bool = False, **values: Any) -> Any:
    """A kio request of this version from plain values: nested entities as dicts (or lists
    of dicts), durations in ms; fields not given keep their schema default; fields the
    version does not have are an error, or left out if ``lenient``."""
    return _entity(request_class(api_key, version), values, lenient)


def _entity(cls: type, values: dict[str, Any], lenient: bool = False) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(values) - set(fields)
    if unknown and not lenient:
        raise TypeError(f"{cls.__qualname__} has no field {sorted(unknown)}")
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        if name in unknown:
            continue
        field = fields[name]
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField) and value is not None:
            kwargs[name] = tuple(_entity(kind.type_, item, lenient) for item in value)
        elif isinstance(kind, EntityField) and value is not None:
            kwargs[name] = _entity(kind.type_, value, lenient)
        elif field.metadata.get("kafka_type", "").startswith("timedelta"):
            kwargs[name] = datetime.timedelta(milliseconds=value)
        elif isinstance(value, list):
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)


# -- the normaliser ----------------------------------------------------------------------


def normalise(value: Any, symbols: dict[str, dict[Any, str]], key: str = "") -> Plain:
    """Plain data of a kio response with (a)-(d) of the module doc applied."""
    if key in SYMBOLS and isinstance(value, (str, int, uuid.UUID)):
        return _symbol(symbols, key, value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: normalise(getattr(value, f.name), symbols, f.name)
            for f in dataclasses.fields(value)
            if f.name not in DROPPED
        }
    if isinstance(value, dict):  # a view's plain data: its fields as an entity's
        return {k: normalise(v, symbols, k) for k, v in value.items() if k not in DROPPED}
    if key == "configs" and isinstance(value, (tuple, list)):
        return {c.name: normalise(c, symbols) for c in value}  # by name: a missing one shows
    if key == "records" and (value is None or isinstance(value, bytes)):
        return decode_records(value or b"")
    if isinstance(value, (tuple, list)):
        items = [normalise(item, symbols, key) for item in value]
        return sorted(items, key=repr) if key in UNORDERED else items
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return value


def _symbol(symbols: dict[str, dict[Any, str]], key: str, value: Any) -> Any:
    if value in ("", -1, None) or value == uuid.UUID(int=0):
        return value if not isinstance(value, uuid.UUID) else "<none>"
    table = symbols.setdefault(key, {})
    if value not in table:
        table[value] = f"<{key}#{len(table) + 1}>"
    return table[value]


def decode_records(data: bytes) -> list[list[Any]]:
    """(offset, timestamp, key, value, header keys) of every record in a record set."""
    out = []
    pos = 0
    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if pos + 12 + length > len(data):
            break  # a partial batch at the end of a fetch (Kafka's size limit cut it)
        batch = data[pos : pos + 12 + length]
        pos += 12 + length
        for r in kafka_records.decode(batch):
            out.append([r.offset, r.timestamp, r.key, r.value, [h.key for h in r.headers]])
    return out


# -- comparing -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Difference:
    path: str
    kafka: Any
    purgatory: Any

    def __str__(self) -> str:
        return f"{self.path}: Kafka {self.kafka!r}, Purgatory {self.purgatory!r}"


MISSING = "<missing>"


def differences(
    kafka: list[tuple[str, Plain]], purgatory: list[tuple[str, Plain]]
) -> list[Difference]:
    """Every path where the two runs' normalised responses differ."""
    return list(_diff(_labelled(kafka), _labelled(purgatory), ""))


def _labelled(responses: list[tuple[str, Plain]]) -> dict[str, Plain]:
    return {label: response for label, response in responses}


def _diff(a: Plain, b: Plain, path: str) -> Iterator[Difference]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            sub = f"{path}.{key}" if path else key
            yield from _diff(a.get(key, MISSING), b.get(key, MISSING), sub)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _diff(x, y, f"{path}[{i}]")
    elif a != b:
        yield Difference(path, a, b)
