"""A JAAS configuration as Kafka's ``sasl.jaas.config`` holds it (Kafka's JaasConfig): one
login module, its control flag and its options, ending with a semicolon (a broker's
listener's users, a client's credentials: shared by broker and clients)::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

A value is quoted (``"..."``, a backslash escapes the next character) or a bare word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<word>[^\s=;"]+)|(?P<sym>[=;]))', re.S)


@dataclass(frozen=True)
class JaasConfig:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas_config(text: str) -> JaasConfig:
    """ValueError says what does not parse (never echoing a value: they hold passwords)."""
    tokens: list[tuple[str, str]] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"JAAS config does not parse at character {pos + 1}")
        if match["quoted"] is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", match["quoted"], flags=re.S)))
        elif match["word"] is not None:
            tokens.append(("word", match["word"]))
        else:
            tokens.append((match["sym"], match["sym"]))
        pos = match.end()
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ValueError("JAAS config must be '<LoginModule> <flag> [name=value ...];'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _FLAGS:
        raise ValueError(f"JAAS control flag {tokens[1][1]!r} is not one of {', '.join(_FLAGS)}")
    options: dict[str, str] = {}
    rest = tokens[2:]
    while rest and rest[0][0] != ";":
        if len(rest) < 3 or rest[0][0] != "word" or rest[1][0] != "=" or rest[2][0] == ";":
            raise ValueError(f"JAAS option of {module} must be name=value")
        options[rest[0][1]] = rest[2][1]
        rest = rest[3:]
    if not rest:
        raise ValueError("JAAS config must end with ';'")
    if len(rest) > 1:
        raise ValueError("JAAS config holds one login module: nothing may follow its ';'")
    return JaasConfig(module, flag, options)
