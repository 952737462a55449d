"""Admin HTTP (aiohttp, on the broker's event loop): /metrics, /healthz, /v1/state,
/v1/config (GET every config; PUT /v1/config/<name> {"value": ...} changes a dynamic one)
and /v1/faults (GET, POST a spec, DELETE /v1/faults/<name>, POST /v1/faults/reset)."""

from __future__ import annotations

from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from purgatory.broker.config.broker_config import BrokerConfig, StaticConfigError
from purgatory.broker.config.definitions import BY_NAME, ConfigError
from purgatory.broker.ops.faults import FaultError, FaultInjector, parse_spec
from purgatory.broker.ops.metrics import BrokerMetrics
from purgatory.broker.replication.replica_fetcher import FetcherStats


class AdminTarget(Protocol):
    """What the admin app may see and change of a broker, and nothing more."""

    broker_id: int
    config: BrokerConfig
    metrics: BrokerMetrics
    faults: FaultInjector
    log: Any

    @property
    def fetcher_stats(self) -> dict[int, FetcherStats]: ...

    def health_problem(self) -> str | None: ...

    def state(self) -> dict[str, Any]: ...

    def change_config(self, name: str, value: Any) -> tuple[Any, Any]: ...


def make_app(broker: AdminTarget) -> web.Application:
    async def metrics(_: web.Request) -> web.Response:
        body = generate_latest(broker.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        problem = broker.health_problem()
        if problem:
            return web.json_response({"status": "starting", "reason": problem}, status=503)
        return web.json_response({"status": "ok", "broker_id": broker.broker_id})

    async def state(_: web.Request) -> web.Response:
        return web.json_response(broker.state())

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

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/v1/state", state)
    app.router.add_get("/v1/config", get_config)
    app.router.add_put("/v1/config/{name}", put_config)
    app.router.add_get("/v1/samples/replica-fetch", replica_fetch_samples)
    app.router.add_get("/v1/faults", list_faults)
    app.router.add_post("/v1/faults", add_fault)
    app.router.add_post("/v1/faults/reset", reset_faults)
    app.router.add_delete("/v1/faults/{name}", remove_fault)
    return app


class AdminServer:
    def __init__(self, broker: AdminTarget) -> None:
        # A short grace for open HTTP connections: stopping a broker should not wait on them.
        self.runner = web.AppRunner(
            make_app(broker), access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        await self.runner.setup()
        site = web.TCPSite(self.runner, host, port, reuse_address=True)
        await site.start()
        self.port = int(self.runner.addresses[-1][1])
        return self.port

    async def stop(self) -> None:
        await self.runner.cleanup()
