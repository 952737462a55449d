"""One JSON request to a broker's admin HTTP API (stdlib only, blocking): what the
`purgatory admin` commands and `purgatory.testing.Cluster` send."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def admin_request(method: str, url: str, body: Any = None, timeout: float = 10) -> tuple[int, Any]:
    """(HTTP status, JSON payload); an error status is returned, not raised. A broker
    that does not answer raises URLError or OSError."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)
