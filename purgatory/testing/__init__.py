"""Purgatory in your tests: `Cluster` (``from purgatory.testing import Cluster``) and the
pytest plugin (`purgatory.testing.plugin`, registered as a ``pytest11`` entry point)."""

from purgatory.testing.cluster import Cluster, ClusterError

__all__ = ["Cluster", "ClusterError"]
