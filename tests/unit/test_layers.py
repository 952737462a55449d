"""The layer table of docs/design.md, held by walking every import (ast), lazy ones too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
OURS = ("protocol", "clients", "broker", "experiments", "purgatory")
# Folders at the top of the repository, installed (and imported) as purgatory.<name>;
# the layer table names them without the prefix.
MAPPED = ("protocol", "clients", "broker", "experiments")

# package (or module prefix) -> the prefixes of ours it may import
ALLOWED: dict[str, tuple[str, ...]] = {
    # Shared infrastructure (histograms, delayed receiving, the lazy command loader).
    "purgatory.common": ("purgatory.common",),
    "protocol": ("protocol",),
    # A generic delayed-operation engine: nothing about requests, brokers or clients.
    "broker.purgatory": ("broker.purgatory", "purgatory.common"),
    "clients": ("clients", "protocol", "purgatory.common"),
    "broker": ("broker", "clients", "protocol", "purgatory.common"),
    # Experiments drive brokers as processes: the command lines that start them
    # (broker.local_cluster), the supervisor that stops, kills and restarts them, and the
    # purgatory engine's benchmark, which runs in-process.
    "experiments": (
        "experiments",
        "clients",
        "protocol",
        "purgatory.common",
        "broker.local_cluster",
        "broker.ops.supervisor",
        "broker.purgatory",
    ),
    "purgatory": OURS,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_name(name: str) -> str:
    """purgatory.broker.server -> broker.server; other names as they are."""
    head, _, rest = name.partition(".")
    return rest if head == "purgatory" and rest.split(".")[0] in MAPPED else name


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Our modules ``path`` imports, by layer name."""
    return [
        (line, layer_name(name)) for line, name in raw_imports(path) if name.split(".")[0] in OURS
    ]


def raw_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # `from broker import commands` imports broker.commands
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def rule_for(module: str) -> tuple[str, tuple[str, ...]]:
    matches = [p for p in ALLOWED if module == p or module.startswith(p + ".")]
    layer = max(matches, key=len)
    return layer, ALLOWED[layer]


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


SOURCES = sorted(
    p
    for package in OURS
    for p in (ROOT / package).rglob("*.py")
    if not any((ROOT / "purgatory" / m) in p.parents for m in MAPPED)  # the links to them
)


EVERY_FILE = SOURCES + sorted((ROOT / "tests").rglob("*.py"))


@pytest.mark.parametrize("path", EVERY_FILE, ids=[module_name(p) for p in EVERY_FILE])
def test_our_packages_are_imported_through_the_purgatory_namespace(path: Path) -> None:
    """Installed, only ``purgatory`` exists: ``import broker`` would work from a checkout
    and fail in a user's environment (or import their own ``protocol``)."""
    for line, name in raw_imports(path):
        if name.split(".")[0] in MAPPED:
            pytest.fail(f"{module_name(path)}:{line} imports {name}; use purgatory.{name}")


@pytest.mark.parametrize("path", SOURCES, ids=[module_name(p) for p in SOURCES])
def test_imports_follow_the_layer_table(path: Path) -> None:
    module = module_name(path)
    layer, allowed = rule_for(module)
    for line, name in imports_of(path):
        # `from clients.cli import commands` names a submodule as well as the package.
        if any(under(name, prefix) or under(prefix, name) for prefix in allowed):
            continue
        pytest.fail(f"{module}:{line} imports {name}; {layer} may import only {allowed}")


# Below KafkaApis the broker speaks domain types: no wire struct, codec or connection.
DOMAIN = ("broker.replication", "broker.log", "broker.coordinator", "broker.purgatory")
WIRE = (
    "protocol.messages",
    "protocol.api",
    "protocol.framing",
    "clients.connection",
    "broker.network",
    "broker.api",
)
DOMAIN_SOURCES = [p for p in SOURCES if any(under(module_name(p), d) for d in DOMAIN)]


@pytest.mark.parametrize("path", DOMAIN_SOURCES, ids=[module_name(p) for p in DOMAIN_SOURCES])
def test_the_domain_sees_no_wire_struct(path: Path) -> None:
    for line, name in imports_of(path):
        if any(under(name, wire) for wire in WIRE):
            pytest.fail(f"{module_name(path)}:{line} imports {name}, a wire-level module")


# The client library (connection, producer, consumer, admin) is built on by the command
# line (clients.cli) and the perf tools (clients.perf), never the other way round.
TOOLS = ("clients.cli", "clients.perf")
LIBRARY_SOURCES = [
    p
    for p in SOURCES
    if under(module_name(p), "clients") and not any(under(module_name(p), t) for t in TOOLS)
]


@pytest.mark.parametrize("path", LIBRARY_SOURCES, ids=[module_name(p) for p in LIBRARY_SOURCES])
def test_the_client_library_does_not_import_its_tools(path: Path) -> None:
    for line, name in imports_of(path):
        if any(under(name, tool) for tool in TOOLS):
            pytest.fail(f"{module_name(path)}:{line} imports {name}, a tool built on the library")


def test_the_layer_table_is_enforced_somewhere() -> None:
    # Guard the guard: a forbidden import is caught.
    assert not any(under("broker.server", p) for p in ALLOWED["clients"])
    assert rule_for("broker.purgatory.timer")[0] == "broker.purgatory"
    assert rule_for("broker.replication.partition")[0] == "broker"
    assert len(DOMAIN_SOURCES) > 10
    assert len(LIBRARY_SOURCES) >= 7
    assert rule_for("purgatory.common.histogram")[0] == "purgatory.common"
