"""``--consumer-property`` and ``--producer-property NAME=VALUE``: client configs by Kafka's
names, read into keyword arguments of `Consumer` and `Producer`.

Only the names these clients honour are taken; any other is refused with the list, so a
misspelt name is an error rather than a silent no-op. (Declarations only: the command
parser imports this module for the names in its help.)
"""

from __future__ import annotations

from collections.abc import Callable


def _strategies(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(","))


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false")
    return text.lower() == "true"


def _acks(text: str) -> str:
    if text not in ("all", "-1", "0", "1"):
        raise ValueError(f"{text!r} is not all, -1, 0 or 1")
    return text


# Each Kafka name: the keyword argument it becomes and how its value is read. The console
# consumer sets group.id and auto.offset.reset itself and commits what it printed.
Reader = Callable[[str], object]
CONSUMER_PROPERTIES: dict[str, tuple[str, Reader]] = {
    "client.id": ("client_id", str),
    "fetch.min.bytes": ("fetch_min_bytes", int),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "group.instance.id": ("group_instance_id", str),
    "session.timeout.ms": ("session_timeout_ms", int),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", int),
    "max.poll.interval.ms": ("max_poll_interval_ms", int),
    "partition.assignment.strategy": ("partition_assignment_strategy", _strategies),
    "isolation.level": ("isolation_level", str),
}
PRODUCER_PROPERTIES: dict[str, tuple[str, Reader]] = {
    "acks": ("acks", _acks),
    "batch.size": ("batch_size", int),
    "buffer.memory": ("buffer_memory", int),
    "client.id": ("client_id", str),
    "delivery.timeout.ms": ("delivery_timeout_ms", int),
    "enable.idempotence": ("enable_idempotence", _boolean),
    "linger.ms": ("linger_ms", int),
    "max.block.ms": ("max_block_ms", int),
    "max.in.flight.requests.per.connection": ("max_in_flight", int),
    "max.request.size": ("max_request_size", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retries": ("retries", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
}


def client_properties(
    flag: str, pairs: list[str], known: dict[str, tuple[str, Reader]]
) -> dict[str, object]:
    """``NAME=VALUE`` pairs given with ``flag`` as keyword arguments (a later pair wins);
    ValueError names a bad one."""
    kwargs: dict[str, object] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name, value = name.strip(), value.strip()
        if not sep:
            raise ValueError(f"{flag} expects NAME=VALUE, got {pair!r}")
        if name not in known:
            kind = flag.removeprefix("--").removesuffix("-property")  # consumer, producer
            raise ValueError(
                f"{flag} {name!r} is not a {kind} config this tool sets; known: " + ", ".join(known)
            )
        keyword, read = known[name]
        try:
            kwargs[keyword] = read(value)
        except ValueError as exc:
            reason = f"{value!r} is not a number" if read is int else str(exc)
            raise ValueError(f"{flag} {name}: {reason}") from None
    return kwargs
