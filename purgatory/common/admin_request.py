"""One JSON request to a broker's admin HTTP API (stdlib only, blocking): what the
`purgatory admin` commands and `purgatory.testing.Cluster` send; with the bearer token
changes need when the API listens beyond loopback (``PURGATORY_ADMIN_TOKEN``, the same
variable that sets a broker's ``admin.token``)."""

from __future__ import annotations

import hmac
import json
import os
import urllib.error
import urllib.request
from typing import Any

TOKEN_ENV = "PURGATORY_ADMIN_TOKEN"


def auth_headers(token: str | None = None) -> dict[str, str]:
    """The Authorization header for ``token`` (None: ``PURGATORY_ADMIN_TOKEN``), if any."""
    token = os.environ.get(TOKEN_ENV, "") if token is None else token
    return {"Authorization": f"Bearer {token}"} if token else {}


def bearer_matches(authorization: str, token: str) -> bool:
    """Whether an Authorization header carries ``token`` (compared in constant time): the
    check of every admin endpoint that takes changes."""
    return hmac.compare_digest(authorization.encode(), f"Bearer {token}".encode())


def admin_request(
    method: str, url: str, body: Any = None, timeout: float = 10, token: str | None = None
) -> tuple[int, Any]:
    """(HTTP status, JSON payload); an error status is returned, not raised. A broker
    that does not answer raises URLError or OSError."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **auth_headers(token)}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)
