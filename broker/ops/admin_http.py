"""Admin HTTP (aiohttp, on the broker's event loop): /metrics, /healthz, /v1/state,
/v1/config (GET every config; PUT /v1/config/<name> {"value": ...} changes a dynamic one),
/v1/faults (GET, POST a spec, DELETE /v1/faults/<name>, POST /v1/faults/reset),
/v1/logs?limit=N (the latest log events, INFO and above, oldest first) and, on the
controller, POST /v1/partitions/<topic>/<partition>/leader {"broker_id": N} (a mock
cluster's "set the leader": N becomes the preferred replica and leads)."""

from __future__ import annotations

import ipaddress
import secrets
import sys
from collections.abc import Awaitable
from typing import Any, Protocol

import msgspec
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from purgatory.broker.config.broker_config import BrokerConfig, StaticConfigError
from purgatory.broker.config.definitions import BY_NAME, ConfigError
from purgatory.broker.ops.faults import FaultError, FaultInjector, parse_spec
from purgatory.broker.ops.metrics import BrokerMetrics
from purgatory.broker.ops.recent_logs import RECENT_LOGS
from purgatory.broker.replication.replica_fetcher import FetcherStats
from purgatory.common.admin_request import bearer_matches
from purgatory.common.broker_state import BrokerState
from purgatory.protocol.errors import ErrorCode

LEADER_MOVE_TIMEOUT_MS = 10_000
# How a refused leader move is answered over HTTP.
_MOVE_STATUS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 404,
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: 400,
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: 409,
}


class LeaderMover(Protocol):
    def move_leader(
        self, topic: str, partition: int, broker: int, timeout_ms: int
    ) -> Awaitable[tuple[ErrorCode, str | None]]: ...


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
    def controller(self) -> LeaderMover | None: ...

    @property
    def controller_id(self) -> int: ...

    def health_problem(self) -> str | None: ...

    def state(self) -> BrokerState: ...

    def change_config(self, name: str, value: Any) -> tuple[Any, Any]: ...


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


def _bearer_check(token: str) -> Any:
    @web.middleware
    async def check(request: web.Request, handler: Any) -> web.StreamResponse:
        authorization = request.headers.get("Authorization", "")
        if request.method not in READS and not bearer_matches(authorization, token):
            return web.json_response(
                {
                    "error": "changes need the admin token: Authorization: Bearer "
                    "<admin.token> (PURGATORY_ADMIN_TOKEN for purgatory admin, or "
                    "--token); reads need none"
                },
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="purgatory-admin"'},
            )
        response: web.StreamResponse = await handler(request)
        return response

    return check


def make_app(broker: AdminTarget, token: str | None = None) -> web.Application:
    """The admin app; with ``token``, requests that change something must carry it."""

    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(broker.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        problem = broker.health_problem()
        if problem:
            return web.json_response({"status": "starting", "reason": problem}, status=503)
        return web.json_response({"status": "ok", "broker_id": broker.broker_id})

    async def state(_: web.Request) -> web.Response:
        return web.Response(
            body=msgspec.json.encode(broker.state()), content_type="application/json"
        )

    async def get_config(_: web.Request) -> web.Response:
        return web.json_response(
            {"broker_id": broker.broker_id, "configs": broker.config.describe()}
        )

    async def put_config(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "value" not in body:
            return web.json_response({"error": 'the body must be JSON: {"value": ...}'}, status=400)
        try:
            old, new = broker.change_config(name, body["value"])
        except StaticConfigError as exc:
            return web.json_response({"error": str(exc)}, status=409)
        except ConfigError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"name": BY_NAME[name].name, "old": old, "new": new})

    async def logs(request: web.Request) -> web.Response:
        raw = request.query.get("limit", "100")
        if not raw.isdigit():
            return web.json_response({"error": "limit must be a whole number"}, status=400)
        events = RECENT_LOGS.events(broker.broker_id, int(raw))
        return web.json_response({"broker_id": broker.broker_id, "events": events})

    async def list_faults(_: web.Request) -> web.Response:
        return web.json_response(
            {"broker_id": broker.broker_id, "faults": broker.faults.describe()}
        )

    async def add_fault(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"error": "the body must be a JSON fault spec"}, status=400)
        try:
            fault = broker.faults.add(parse_spec(body))
        except FaultError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        broker.log.warning("fault_added", **fault.describe())
        return web.json_response(fault.describe(), status=201)

    async def remove_fault(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        fault = broker.faults.remove(name)
        if fault is None:
            return web.json_response({"error": f"no fault named {name!r}"}, status=404)
        broker.log.warning("fault_removed", name=name, applied=fault.applied)
        return web.json_response(fault.describe())

    async def reset_faults(_: web.Request) -> web.Response:
        removed = broker.faults.describe()
        broker.faults.reset()
        if removed:
            broker.log.warning("faults_reset", removed=len(removed))
        return web.json_response({"removed": removed})

    async def replica_fetch_samples(request: web.Request) -> web.Response:
        try:
            since = float(request.query.get("since", "0"))
        except ValueError:
            return web.json_response(
                {"error": "since must be a number (epoch seconds)"}, status=400
            )
        samples = [
            {"ts": ts, "source_broker": source, "total_ms": total * 1000, "wait_ms": wait * 1000}
            for source, stats in sorted(broker.fetcher_stats.items())
            for ts, total, wait in list(stats.samples)
            if ts > since
        ]
        return web.json_response({"broker_id": broker.broker_id, "samples": samples})

    async def move_leader(request: web.Request) -> web.Response:
        controller = broker.controller
        if controller is None:
            return web.json_response(
                {
                    "error": f"broker {broker.broker_id} is not the controller; send this "
                    f"to broker {broker.controller_id}'s admin API",
                    "controller_id": broker.controller_id,
                },
                status=409,
            )
        topic, raw_partition = request.match_info["topic"], request.match_info["partition"]
        try:
            body = await request.json()
        except ValueError:
            body = None
        if (
            not raw_partition.isdigit()
            or not isinstance(body, dict)
            or not isinstance(body.get("broker_id"), int)
        ):
            return web.json_response(
                {"error": 'POST /v1/partitions/<topic>/<partition>/leader {"broker_id": N}'},
                status=400,
            )
        partition, target = int(raw_partition), body["broker_id"]
        code, message = await controller.move_leader(
            topic, partition, target, LEADER_MOVE_TIMEOUT_MS
        )
        if code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED):
            return web.json_response(
                {"error": f"{code.name}: {message}"}, status=_MOVE_STATUS.get(code, 409)
            )
        answer = {"topic": topic, "partition": partition, "leader": target}
        return web.json_response({**answer, "changed": code == ErrorCode.NONE})

    app = web.Application(middlewares=[_bearer_check(token)] if token else [])
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/v1/state", state)
    app.router.add_get("/v1/logs", logs)
    app.router.add_get("/v1/config", get_config)
    app.router.add_put("/v1/config/{name}", put_config)
    app.router.add_get("/v1/samples/replica-fetch", replica_fetch_samples)
    app.router.add_get("/v1/faults", list_faults)
    app.router.add_post("/v1/faults", add_fault)
    app.router.add_post("/v1/faults/reset", reset_faults)
    app.router.add_delete("/v1/faults/{name}", remove_fault)
    app.router.add_post("/v1/partitions/{topic}/{partition}/leader", move_leader)
    return app


class AdminServer:
    def __init__(self, broker: AdminTarget) -> None:
        self.broker = broker
        self.runner: web.AppRunner | None = None
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
        # A short grace for open HTTP connections: stopping a broker should not wait on them.
        self.runner = web.AppRunner(
            make_app(self.broker, self.token),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=1.0,
        )
        await self.runner.setup()
        site = web.TCPSite(self.runner, host, port, reuse_address=True)
        await site.start()
        self.port = int(self.runner.addresses[-1][1])
        return self.port

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
