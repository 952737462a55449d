"""ClientQuotaManager (Kafka's, with its DefaultQuotaCallback): one quota type's quotas
(a produce or fetch byte rate, or the request percentage: Kafka's ClientRequestQuotaManager,
whose throttle is at most one window), the rate each (user, client id) is measured at, and
the throttle time of a client over its quota.

Which quota applies to a user's client, and which clients share its rate (Kafka's
``quotaMetricTags`` and ``quotaLimit``), first found of:

a. user and client id (``/users/U/clients/C``): that client of that user;
b. user and default client id (``/users/U/clients/<default>``): each client of the user;
c. user (``/users/U``): every client of the user together;
d. default user and client id (``/users/<default>/clients/C``): each user's client C;
e. default user and default client id: each client of each user;
f. default user (``/users/<default>``): every client of each user together;
g. client id (``/clients/C``): that client id, whoever the user;
h. default client id (``/clients/<default>``): each client id.

None: the client is not limited (and nothing is recorded for it).
"""

from __future__ import annotations

from purgatory.broker.metadata.client_quota_image import CLIENT_ID, USER, ClientQuotasImage
from purgatory.broker.quota.rate import Rate, throttle_time_ms

# An override's key: (user part, client id part), each absent (None), the type's default
# entity (DEFAULT) or a name.
DEFAULT = "\0<default>"
QuotaKey = tuple[str | None, str | None]


class ClientSensors:
    """One (user, client id) tag pair's measurement: the rate its quota is checked on,
    and the throttle time it was given (Kafka's byte-rate and throttle-time sensors)."""

    __slots__ = ("bound", "client_id", "rate", "throttle_time_ms", "throttles", "user")

    def __init__(self, user: str, client_id: str, bound: float | None, rate: Rate) -> None:
        self.user = user  # "" when every user shares it (a client id quota)
        self.client_id = client_id  # "" when every client of the user shares it
        self.bound = bound
        self.rate = rate
        self.throttle_time_ms = 0  # in total
        self.throttles = 0


class ClientQuotaManager:
    """Kafka's ClientQuotaManager of one quota type (``Produce`` with the
    producer_byte_rate key, ``Fetch`` with consumer_byte_rate). ``enabled`` is False while
    no entity has the key: nothing is then recorded (the request path does not ask)."""

    def __init__(
        self,
        quota_type: str,
        key: str,
        samples: int,
        window_ms: int,
        max_throttle_ms: int | None = None,
    ) -> None:
        self.quota_type = quota_type
        self.key = key
        # The longest throttle (Kafka's ClientRequestQuotaManager: one window); None: any.
        self.max_throttle_ms = max_throttle_ms
        self.samples = samples
        self.window_ms = window_ms
        self.overrides: dict[QuotaKey, float] = {}
        self.enabled = False
        self.sensors: dict[tuple[str, str], ClientSensors] = {}  # by metric tags
        self._by_client: dict[tuple[str, str], ClientSensors] = {}  # by (user, client id)

    def update(self, quotas: ClientQuotasImage) -> None:
        """Take this type's quotas from an image; rates measured so far are kept (Kafka
        changes a metric's quota in place)."""
        overrides: dict[QuotaKey, float] = {}
        for entity, values in quotas.entities.items():
            value = values.get(self.key)
            names = dict(entity)
            if value is None or not (USER in names or CLIENT_ID in names):
                continue  # (an ip entity's quotas are connection rates)
            overrides[(_part(names, USER), _part(names, CLIENT_ID))] = value
        self.overrides = overrides
        self.enabled = bool(overrides)
        self._by_client.clear()
        for sensors in self.sensors.values():
            sensors.bound = self.quota_limit(sensors.user, sensors.client_id)

    def metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """Kafka's quotaMetricTags: the (user, client id) whose rate this client's
        requests count in (cases a-h above)."""
        o = self.overrides
        if (user, client_id) in o or (user, DEFAULT) in o:
            return user, client_id
        if (user, None) in o:
            return user, ""
        if (DEFAULT, client_id) in o or (DEFAULT, DEFAULT) in o:
            return user, client_id
        if (DEFAULT, None) in o:
            return user, ""
        return "", client_id

    def quota_limit(self, user: str, client_id: str) -> float | None:
        """Kafka's quotaLimit of metric tags: the bound, None for none."""
        keys: tuple[QuotaKey, ...] = ()
        if user and client_id:
            keys = ((user, client_id), (user, DEFAULT), (DEFAULT, client_id), (DEFAULT, DEFAULT))
        elif user:
            keys = ((user, None), (DEFAULT, None))
        elif client_id:
            keys = ((None, client_id), (None, DEFAULT))
        o = self.overrides
        for key in keys:
            if key in o:
                return o[key]
        return None

    def client_sensors(self, user: str, client_id: str) -> ClientSensors:
        sensors = self._by_client.get((user, client_id))
        if sensors is None:
            tags = self.metric_tags(user, client_id)
            sensors = self.sensors.get(tags)
            if sensors is None:
                rate = Rate(self.samples, self.window_ms)
                sensors = ClientSensors(*tags, self.quota_limit(*tags), rate)
                self.sensors[tags] = sensors
            self._by_client[(user, client_id)] = sensors
        return sensors

    def record_and_get_throttle_time_ms(
        self, user: str, client_id: str, value: float, now_ms: int
    ) -> int:
        """Record ``value`` (bytes) at ``now_ms``; the throttle time in ms if the rate is
        now over the quota (QuotaUtils.throttleTime), else 0."""
        sensors = self.client_sensors(user, client_id)
        rate = sensors.rate
        rate.record(value, now_ms)
        bound = sensors.bound
        if bound is None:
            return 0
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        throttle_ms = throttle_time_ms(measured, bound, rate.window_size_ms(now_ms))
        if self.max_throttle_ms is not None:
            return min(throttle_ms, self.max_throttle_ms)  # QuotaUtils.boundedThrottleTime
        return throttle_ms

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back what a throttled fetch recorded (its response goes out empty)."""
        self.client_sensors(user, client_id).rate.record(-value, now_ms)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float | None:
        """The most one request may take without being throttled whatever came before
        (Kafka's getMaxValueInQuotaWindow: what caps a fetch's max bytes); None: any."""
        bound = self.client_sensors(user, client_id).bound
        if bound is None:
            return None
        return bound * (self.samples - 1) * self.window_ms / 1000

    def throttled(self, user: str, client_id: str, throttle_ms: int) -> None:
        """Count a throttle given (Kafka's throttle-time sensor)."""
        sensors = self.client_sensors(user, client_id)
        sensors.throttle_time_ms += throttle_ms
        sensors.throttles += 1


def _part(names: dict[str, str | None], kind: str) -> str | None:
    if kind not in names:
        return None
    name = names[kind]
    return DEFAULT if name is None else name
