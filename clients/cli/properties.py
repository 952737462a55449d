"""``--consumer-property`` and ``--producer-property NAME=VALUE`` (and the lines of
``--command-config``, ``--producer.config`` and ``--consumer.config`` files): client configs
by Kafka's names, read into keyword arguments of `Consumer`, `Producer` and `AdminClient`.

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
# Every client's: TLS and SASL (clients/security.py), as librdkafka and Java name them.
SECURITY_PROPERTIES: dict[str, tuple[str, Reader]] = {
    "security.protocol": ("security_protocol", str),
    "ssl.ca.location": ("ssl_ca_location", str),
    "ssl.truststore.location": ("ssl_ca_location", str),
    "ssl.truststore.type": ("ssl_truststore_type", str),
    "ssl.certificate.location": ("ssl_certificate_location", str),
    "ssl.key.location": ("ssl_key_location", str),
    "ssl.key.password": ("ssl_key_password", str),
    "ssl.keystore.location": ("ssl_keystore_location", str),
    "ssl.keystore.type": ("ssl_keystore_type", str),
    "ssl.endpoint.identification.algorithm": ("ssl_endpoint_identification_algorithm", str),
    "sasl.mechanism": ("sasl_mechanism", str),
    "sasl.username": ("sasl_username", str),
    "sasl.password": ("sasl_password", str),
    "sasl.jaas.config": ("sasl_jaas_config", str),
    "sasl.oauthbearer.config": ("sasl_oauthbearer_config", str),
}
# --command-config of the admin tools (topics, consumer-groups, configs, ...).
ADMIN_PROPERTIES: dict[str, tuple[str, Reader]] = {
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout_ms", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    **SECURITY_PROPERTIES,
}
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
    **SECURITY_PROPERTIES,
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
    **SECURITY_PROPERTIES,
}


def client_properties(
    flag: str, pairs: list[str], known: dict[str, tuple[str, Reader]], kind: str | None = None
) -> dict[str, object]:
    """``NAME=VALUE`` pairs given with ``flag`` as keyword arguments (a later pair wins);
    ValueError names a bad one (a ``kind`` config: consumer, producer, by default the
    flag's)."""
    kwargs: dict[str, object] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name, value = name.strip(), value.strip()
        if not sep:
            raise ValueError(f"{flag} expects NAME=VALUE, got {pair!r}")
        if name not in known:
            kind = kind or flag.removeprefix("--").removesuffix("-property")  # consumer, ...
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
