"""The differential corpus: client-level scenarios of exact Kafka requests, each run against
Apache Kafka and Purgatory with the same topic setup (tests/cluster/test_differential.py).

Each scenario is an async function of a `Client` (tests/differential/harness.py) that sends
requests with `call(label, api, version, **fields)`; its topics are named after it
(`c.topic()`), so scenarios do not see each other's. Versions are the newest both brokers
serve for the fields used. Both brokers run with ``auto.create.topics.enable=false``.

One module per API family; every module of this package is imported here, so a new one
only needs its `@scenario` functions (base.py has the registry and the request helpers);
`@secured_scenario` ones run against the secured pair (SASL listeners, the authorizer).
Scenarios run in the order they register: a module that imports another's helpers must
come after it by name (or the other registers early, and metadata_all_topics, which lists
every topic, sees other topics before it).
"""

from __future__ import annotations

import importlib
import pkgutil

from tests.differential.scenarios.base import SCENARIOS, SECURED_SCENARIOS

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")

__all__ = ["SCENARIOS", "SECURED_SCENARIOS"]
