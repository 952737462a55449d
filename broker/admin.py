"""Admin HTTP (aiohttp, on the broker's event loop): /metrics, /healthz, /v1/state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

if TYPE_CHECKING:
    from broker.server import Broker


def make_app(broker: Broker) -> web.Application:
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

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/v1/state", state)
    return app


class AdminServer:
    def __init__(self, broker: Broker) -> None:
        self.runner = web.AppRunner(make_app(broker), access_log=None, handle_signals=False)
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        await self.runner.setup()
        site = web.TCPSite(self.runner, host, port, reuse_address=True)
        await site.start()
        self.port = int(self.runner.addresses[-1][1])
        return self.port

    async def stop(self) -> None:
        await self.runner.cleanup()
