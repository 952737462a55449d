"""Kafka's client properties files for the command-line tools: ``--command-config FILE``
(``--producer.config`` and ``--consumer.config`` for produce and consume), read as Java
reads a ``.properties`` file, their names those of ``--producer-property`` and
``--consumer-property`` (clients/cli/properties.py): a SASL_SSL listener's settings kept
in one file, as Kafka's tools take them."""

from __future__ import annotations

import argparse
import re

from purgatory.clients.admin import AdminClient
from purgatory.clients.cli.properties import ADMIN_PROPERTIES, Reader, client_properties

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)
_KEY_END = re.compile(r"(?<!\\)(?:\\\\)*[=:\s]")


def _unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match[1]
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return _ESCAPES.get(code, code)

    return _ESCAPE.sub(one, text)


def read_properties(text: str) -> list[str]:
    """The ``NAME=VALUE`` pairs of a Java properties file: ``#`` and ``!`` comments, ``=``,
    ``:`` or blanks between name and value, a line ending in ``\\`` continued on the next
    (as a multi-line ``sasl.jaas.config`` is written), Java's escapes."""
    pairs: list[str] = []
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:  # continued: the backslash goes, the next line's indent too
            logical += line[:-1]
            continue
        logical += line
        match = _KEY_END.search(logical)
        if match is None:
            name, value = logical, ""
        else:
            name = logical[: match.end() - 1]
            value = logical[match.end() - 1 :].lstrip()
            if value[:1] in ("=", ":"):
                value = value[1:].lstrip()
        pairs.append(f"{_unescape(name)}={_unescape(value)}")
        logical = ""
    if logical:
        pairs.append(logical)
    return pairs


def file_properties(
    flag: str, path: str | None, known: dict[str, tuple[str, Reader]], kind: str
) -> dict[str, object]:
    """The keyword arguments of the properties file given with ``flag`` (none: {});
    ValueError names the file and a bad line, OSError one that cannot be read."""
    if path is None:
        return {}
    with open(path, encoding="utf-8") as file:
        pairs = read_properties(file.read())
    return client_properties(f"{flag} {path}:", pairs, known, kind)


def admin_client(args: argparse.Namespace) -> AdminClient:
    """The AdminClient of an admin tool: ``--bootstrap-server`` and the configs of its
    ``--command-config`` file."""
    settings = file_properties(
        "--command-config", getattr(args, "command_config", None), ADMIN_PROPERTIES, "client"
    )
    return AdminClient(args.bootstrap, **settings)  # type: ignore[arg-type]
