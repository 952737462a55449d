"""Admin HTTP (purgatory.common.http_server, on the broker's event loop): /metrics, /healthz, /v1/state,
/v1/config (GET every config; PUT /v1/config/<name> {"value": ...} changes a dynamic one of
this broker, through the controller and the metadata log as IncrementalAlterConfigs does),
/v1/faults (GET, POST a spec, DELETE /v1/faults/<name>, POST /v1/faults/reset),
/v1/logs?limit=N (the latest log events, INFO and above, oldest first) and POST
/v1/partitions/<topic>/<partition>/leader {"broker_id": N} (a mock cluster's "set the
leader": N becomes the preferred replica and leads; any broker forwards it to the active
controller)."""

from __future__ import annotations

import ipaddress
import os
import secrets
import sys
import urllib.parse
from collections.abc import Awaitable
from typing import Any, Protocol

import msgspec
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from purgatory.broker.config.broker_config import BrokerConfig, StaticConfigError
from purgatory.broker.config.config_def import ConfigError
from purgatory.broker.config.definitions import BY_NAME
from purgatory.broker.ops.faults import FaultError, FaultInjector, parse_spec
from purgatory.broker.ops.metrics import BrokerMetrics
from purgatory.broker.ops.recent_logs import RECENT_LOGS
from purgatory.broker.replication.replica_fetcher import FetcherStats
from purgatory.common.admin_request import bearer_matches
from purgatory.common.broker_state import BrokerState
from purgatory.common.http_server import (
    Guard,
    HttpRequest,
    HttpResponse,
    HttpServer,
    Router,
    json_response,
)
from purgatory.protocol.errors import ErrorCode, error_name

LEADER_MOVE_TIMEOUT_MS = 10_000
# How a refused leader move is answered over HTTP.
_MOVE_STATUS: dict[int, int] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 404,
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: 400,
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: 409,
    ErrorCode.NOT_CONTROLLER: 503,
}


class LeaderMover(Protocol):
    def move_leader(
        self, topic: str, partition: int, broker: int, timeout_ms: int
    ) -> Awaitable[tuple[int, str | None]]: ...


class AdminTarget(Protocol):
    """What the admin app may see and change of a broker, and nothing more."""

    broker_id: int
    config: BrokerConfig
    metrics: BrokerMetrics
    faults: FaultInjector
    log: Any

    @property
    def fetcher_stats(self) -> dict[int, FetcherStats]: ...

    @property
    def forwarding(self) -> LeaderMover: ...

    @property
    def controller_id(self) -> int: ...

    def health_problem(self) -> str | None: ...

    def state(self) -> BrokerState: ...

    async def state_in_slices(self) -> BrokerState: ...

    def replica_batches(self, topic: str, partition: int, from_offset: int) -> Any: ...

    async def change_config(self, name: str, value: Any) -> tuple[Any, Any]: ...


READS = frozenset({"GET", "HEAD", "OPTIONS"})


def resolve_token(configured: str, host: str) -> tuple[str | None, bool]:
    """(the token changes need, whether it was generated): ``admin.token`` if set; else
    none on a loopback address, and a new one on any other (a container's 0.0.0.0)."""
    if configured:
        return configured, False
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False  # a host name: reachable from elsewhere
    return (None, False) if loopback else (secrets.token_urlsafe(24), True)


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _hostname(authority: str) -> str:
    """The host of a Host header or an Origin's authority, without port or brackets."""
    authority = authority.strip().lower()
    if authority.startswith("["):  # [::1]:9644
        return authority[1 : authority.find("]")] if "]" in authority else authority
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


def _mutation_guard(token: str | None, host_names: frozenset[str]) -> Guard:
    """Who may change the broker: reads are open; a POST must be JSON (a web page's
    form or text/plain request is not); then the bearer token when there is one, else a
    Host among ``host_names`` (a rebound DNS name is not) and an Origin, if any, of one
    of them (another site's page is not)."""

    def check(request: HttpRequest) -> HttpResponse | None:
        if request.method in READS:
            return None
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if request.method == "POST" and content_type != "application/json":
            return json_response(
                {"error": "changes are JSON: send Content-Type: application/json"}, status=415
            )
        if token:
            if bearer_matches(request.headers.get("authorization", ""), token):
                return None
            return json_response(
                {
                    "error": "changes need the admin token: Authorization: Bearer "
                    "<admin.token> (PURGATORY_ADMIN_TOKEN for purgatory admin, or "
                    "--token); reads need none"
                },
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="purgatory-admin"'},
            )
        host = _hostname(request.headers.get("host", ""))
        if host not in host_names:
            return json_response(
                {
                    "error": f"changes need a Host of this machine ({', '.join(sorted(host_names))}), "
                    f"not {host!r}: a request through another name may be a web page's "
                    "(DNS rebinding); set admin.token to allow any"
                },
                status=403,
            )
        origin = request.headers.get("origin")
        if origin is not None:
            parsed = urllib.parse.urlsplit(origin)
            if parsed.scheme not in ("http", "https") or _hostname(parsed.netloc) not in host_names:
                return json_response(
                    {"error": f"changes from a page of another site ({origin}) are refused"},
                    status=403,
                )
        return None

    return check


def make_router(broker: AdminTarget) -> Router:
    """The admin API's routes."""

    async def metrics(_: HttpRequest) -> HttpResponse:
        body = generate_latest(broker.metrics.registry)
        return HttpResponse(body=body, content_type=CONTENT_TYPE_LATEST)

    async def healthz(_: HttpRequest) -> HttpResponse:
        # The pid proves which process answers: a supervisor waiting on a broker it started
        # is not fooled by another one on the same admin port.
        problem = broker.health_problem()
        if problem:
            return json_response(
                {"status": "starting", "reason": problem, "pid": os.getpid()}, status=503
            )
        return json_response({"status": "ok", "broker_id": broker.broker_id, "pid": os.getpid()})

    async def state(_: HttpRequest) -> HttpResponse:
        return HttpResponse(body=msgspec.json.encode(await broker.state_in_slices()))

    async def get_config(_: HttpRequest) -> HttpResponse:
        return json_response({"broker_id": broker.broker_id, "configs": broker.config.describe()})

    async def put_config(request: HttpRequest) -> HttpResponse:
        name = request.params["name"]
        try:
            body = request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "value" not in body:
            return json_response({"error": 'the body must be JSON: {"value": ...}'}, status=400)
        try:
            old, new = await broker.change_config(name, body["value"])
        except StaticConfigError as exc:
            return json_response({"error": str(exc)}, status=409)
        except ConfigError as exc:
            return json_response({"error": str(exc)}, status=400)
        return json_response({"name": BY_NAME[name].name, "old": old, "new": new})

    async def logs(request: HttpRequest) -> HttpResponse:
        raw = request.query.get("limit", "100")
        if not raw.isdigit():
            return json_response({"error": "limit must be a whole number"}, status=400)
        events = RECENT_LOGS.events(broker.broker_id, int(raw))
        return json_response({"broker_id": broker.broker_id, "events": events})

    async def batches(request: HttpRequest) -> HttpResponse:
        raw_partition, raw_from = request.params["partition"], request.query.get("from", "0")
        if not raw_partition.isdigit() or not raw_from.isdigit():
            return json_response(
                {"error": "GET /v1/partitions/<topic>/<partition>/batches[?from=OFFSET]"},
                status=400,
            )
        topic = request.params["topic"]
        answer = broker.replica_batches(topic, int(raw_partition), int(raw_from))
        if answer is None:
            return json_response(
                {"error": f"broker {broker.broker_id} holds no replica of {topic}-{raw_partition}"},
                status=404,
            )
        return json_response(answer)

    async def list_faults(_: HttpRequest) -> HttpResponse:
        return json_response({"broker_id": broker.broker_id, "faults": broker.faults.describe()})

    async def add_fault(request: HttpRequest) -> HttpResponse:
        try:
            body = request.json()
        except ValueError:
            return json_response({"error": "the body must be a JSON fault spec"}, status=400)
        try:
            fault = broker.faults.add(parse_spec(body))
        except FaultError as exc:
            return json_response({"error": str(exc)}, status=400)
        broker.log.warning("fault_added", **fault.describe())
        return json_response(fault.describe(), status=201)

    async def remove_fault(request: HttpRequest) -> HttpResponse:
        name = request.params["name"]
        fault = broker.faults.remove(name)
        if fault is None:
            return json_response({"error": f"no fault named {name!r}"}, status=404)
        broker.log.warning("fault_removed", name=name, applied=fault.applied)
        return json_response(fault.describe())

    async def reset_faults(_: HttpRequest) -> HttpResponse:
        removed = broker.faults.describe()
        broker.faults.reset()
        if removed:
            broker.log.warning("faults_reset", removed=len(removed))
        return json_response({"removed": removed})

    async def replica_fetch_samples(request: HttpRequest) -> HttpResponse:
        try:
            since = float(request.query.get("since", "0"))
        except ValueError:
            return json_response({"error": "since must be a number (epoch seconds)"}, status=400)
        samples = [
            {"ts": ts, "source_broker": source, "total_ms": total * 1000, "wait_ms": wait * 1000}
            for source, stats in sorted(broker.fetcher_stats.items())
            for ts, total, wait in list(stats.samples)
            if ts > since
        ]
        return json_response({"broker_id": broker.broker_id, "samples": samples})

    async def move_leader(request: HttpRequest) -> HttpResponse:
        topic, raw_partition = request.params["topic"], request.params["partition"]
        try:
            body = request.json()
        except ValueError:
            body = None
        if (
            not raw_partition.isdigit()
            or not isinstance(body, dict)
            or not isinstance(body.get("broker_id"), int)
        ):
            return json_response(
                {"error": 'POST /v1/partitions/<topic>/<partition>/leader {"broker_id": N}'},
                status=400,
            )
        partition, target = int(raw_partition), body["broker_id"]
        code, message = await broker.forwarding.move_leader(
            topic, partition, target, LEADER_MOVE_TIMEOUT_MS
        )
        if code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED):
            return json_response(
                {"error": f"{error_name(code)}: {message}"},
                status=_MOVE_STATUS.get(code, 409),
            )
        answer = {"topic": topic, "partition": partition, "leader": target}
        return json_response({**answer, "changed": code == ErrorCode.NONE})

    router = Router()
    router.add("GET", "/metrics", metrics)
    router.add("GET", "/healthz", healthz)
    router.add("GET", "/v1/state", state)
    router.add("GET", "/v1/logs", logs)
    router.add("GET", "/v1/config", get_config)
    router.add("PUT", "/v1/config/{name}", put_config)
    router.add("GET", "/v1/samples/replica-fetch", replica_fetch_samples)
    router.add("GET", "/v1/faults", list_faults)
    router.add("POST", "/v1/faults", add_fault)
    router.add("POST", "/v1/faults/reset", reset_faults)
    router.add("DELETE", "/v1/faults/{name}", remove_fault)
    router.add("POST", "/v1/partitions/{topic}/{partition}/leader", move_leader)
    router.add("GET", "/v1/partitions/{topic}/{partition}/batches", batches)
    return router


class AdminServer:
    def __init__(self, broker: AdminTarget) -> None:
        self.broker = broker
        self.server: HttpServer | None = None
        self.port = 0
        self.token: str | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen; a token generated for a non-loopback address is printed once, on
        stderr only (never in the log, which ``/v1/logs`` serves to anyone)."""
        self.token, generated = resolve_token(self.broker.config["admin.token"], host)
        if generated:
            print(
                f"purgatory broker {self.broker.broker_id}: the admin API on {host} needs "
                f"this bearer token for changes: {self.token} (choose one with admin.token "
                "or PURGATORY_ADMIN_TOKEN)",
                file=sys.stderr,
                flush=True,
            )
            self.broker.log.warning("admin_token_generated", admin_host=host)
        self.server = HttpServer(
            make_router(self.broker),
            guard=_mutation_guard(self.token, LOOPBACK_NAMES | {host.lower().strip("[]")}),
            on_error=self._failed,
        )
        self.port = await self.server.start(host, port)
        return self.port

    def _failed(self, request: HttpRequest, exc: BaseException) -> None:
        # Called while the handler's exception is handled: the log line carries its traceback.
        self.broker.log.exception(
            "admin_request_failed", method=request.method, path=request.path, error=str(exc)
        )

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
