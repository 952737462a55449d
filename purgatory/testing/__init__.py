"""Purgatory in your tests: `Cluster` (``from purgatory.testing import Cluster``) and the
pytest plugin (`purgatory.testing.plugin`, registered as a ``pytest11`` entry point).
`Cluster` is imported when first asked for, so the CLI's start does not pay for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from purgatory.testing.cluster import Cluster, ClusterError

__all__ = ["Cluster", "ClusterError"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'purgatory.testing' has no attribute {name!r}")
    from purgatory.testing import cluster

    return getattr(cluster, name)
