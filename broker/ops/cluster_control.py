"""The control endpoint of `purgatory cluster`: a small HTTP API over its Supervisor, so a
user or a program can stop, kill, pause and restart brokers of the running cluster
(`purgatory admin broker ...` is its command line).

    GET  /v1/brokers                      every broker's state
    POST /v1/brokers/<id>/<action>        start, stop, kill, pause, resume, restart

start and restart answer once the broker is healthy. Answers are JSON; errors carry
``{"error": ...}`` with 400 (bad request), 404 (no such broker) or 409 (wrong state).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from purgatory.broker.ops.supervisor import Supervisor, SupervisorError
from purgatory.common.admin_request import TOKEN_ENV, bearer_matches

ACTIONS = ("start", "stop", "kill", "pause", "resume", "restart")


def serve_control(
    supervisor: Supervisor,
    host: str,
    port: int,
    on_action: Callable[[int, str], None] | None = None,
    token: str | None = None,
) -> ThreadingHTTPServer:
    """Serve the control API on a daemon thread; ``on_action(broker, action)`` is told of
    every action carried out (to print it); with ``token``, actions need it as a bearer
    token. Returns the server (``shutdown()`` stops it)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # the supervisor prints what matters

        def _answer(self, status: int, payload: Any) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/brokers":
                self._answer(200, {"brokers": supervisor.describe()})
            else:
                self._answer(404, {"error": f"no such path {self.path}; try /v1/brokers"})

        def do_POST(self) -> None:
            if token and not bearer_matches(self.headers.get("Authorization", ""), token):
                self._answer(
                    401,
                    {"error": "actions need the admin token: Authorization: Bearer <token> "
                     f"({TOKEN_ENV} for purgatory admin broker, or --token)"},
                )  # fmt: skip
                return
            parts = self.path.strip("/").split("/")
            if len(parts) != 4 or parts[:2] != ["v1", "brokers"] or parts[3] not in ACTIONS:
                self._answer(
                    400,
                    {"error": f"expected POST /v1/brokers/<id>/<{'|'.join(ACTIONS)}>"},
                )
                return
            try:
                broker_id = int(parts[2])
            except ValueError:
                self._answer(400, {"error": f"broker id must be a number, got {parts[2]!r}"})
                return
            if broker_id not in supervisor.ids:
                self._answer(404, {"error": f"no broker {broker_id}"})
                return
            action = parts[3]
            try:
                getattr(supervisor, action)(broker_id)
                if action in ("start", "restart"):
                    supervisor.wait_healthy([broker_id])
            except SupervisorError as exc:
                self._answer(409, {"error": str(exc)})
                return
            if on_action is not None:
                on_action(broker_id, action)
            self._answer(200, supervisor.describe()[broker_id])

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="cluster-control", daemon=True).start()
    return server
