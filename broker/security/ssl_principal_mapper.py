"""Kafka's SslPrincipalMapper: ``ssl.principal.mapping.rules`` turn a TLS peer's distinguished
name into a principal name; and the distinguished name of a peer certificate, written as
Java's ``X500Principal.getName()`` writes it (RFC 2253), so the rules match here as in Kafka.

Rules are Kafka's grammar: ``RULE:pattern/replacement/`` (optionally ``/L`` or ``/U`` to
lower or upper the result) and ``DEFAULT`` (the name itself), comma-separated and tried in
turn; the first rule whose pattern matches the whole name gives the principal. Patterns are
Java regular expressions, run here by Python's ``re`` (ASCII classes, as Java's defaults);
replacements use Java's ``$1`` group references.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_RULES = "DEFAULT"

# Kafka's RULE_PATTERN, RULE_SPLITTER and RULE_PARSER, character for character.
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)", re.ASCII)
_RULE_PARSER = re.compile(_RULE_PATTERN, re.ASCII)
# Java's named group ``(?<name>...)`` is Python's ``(?P<name>...)``.
_JAVA_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<(?=[A-Za-z])")


class NoMatchingRule(ValueError):
    """No rule applies to the name (Kafka's SslPrincipalMapper.NoMatchingRule)."""


@dataclass(frozen=True)
class Rule:
    """One rule: ``DEFAULT`` (``pattern`` None) or ``RULE:pattern/replacement/[LU]``."""

    pattern: re.Pattern[str] | None
    source: str = ""  # the pattern as written (Java's Pattern.toString())
    replacement: str = ""
    to_lower: bool = False
    to_upper: bool = False

    def apply(self, name: str) -> str | None:
        """The principal name, or None when the pattern does not match the whole name."""
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        # Java's replaceAll: every match of the pattern in the name (a whole-name pattern
        # such as ``.*`` also matches the empty string at the end, as in Java).
        result = self.pattern.sub(lambda m: _java_replacement(m, self.replacement), name)
        if self.to_lower:
            return result.lower()
        if self.to_upper:
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        case = "/L" if self.to_lower else "/U" if self.to_upper else ""
        return f"RULE:{self.source}/{self.replacement}{case}"


class SslPrincipalMapper:
    """The rules of ``ssl.principal.mapping.rules``; ``name(dn)`` applies the first that
    matches. A rule that does not parse (or whose pattern is not a regular expression)
    raises ValueError naming it."""

    def __init__(self, rules: str | None = DEFAULT_RULES) -> None:
        parsed = (_parse_rule(r) for r in _split_rules(DEFAULT_RULES if rules is None else rules))
        self.rules: tuple[Rule, ...] = tuple(r for r in parsed if r is not None)

    @classmethod
    def from_rules(cls, rules: str | None) -> SslPrincipalMapper:
        return cls(rules)

    def name(self, distinguished_name: str) -> str:
        """The principal name for an RFC 2253 distinguished name; NoMatchingRule if no rule
        applies (Kafka then fails the connection's authentication)."""
        for rule in self.rules:
            principal = rule.apply(distinguished_name)
            if principal is not None:
                return principal
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules {self._listed()}")

    def _listed(self) -> str:
        return "[" + ", ".join(str(r) for r in self.rules) + "]"

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = {self._listed()})"

    __repr__ = __str__


def _split_rules(rules: str) -> list[str]:
    return [m.group(1) for m in _RULE_SPLITTER.finditer(rules.strip())]


def _parse_rule(rule: str) -> Rule | None:
    m = _RULE_PARSER.match(rule)
    if m is None:  # the last alternative matches anything: kept for Kafka's shape
        raise ValueError(f"Invalid rule: {rule}")
    if m.end() != len(rule):
        raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[m.end() :]}`")
    if m.group(1) is not None:
        return Rule(None)
    if m.group(2) is None:
        return None  # an empty rule (``,,``) is ignored
    source = m.group(2)
    try:
        pattern = re.compile(_JAVA_NAMED_GROUP.sub("(?P<", source), re.ASCII)
    except re.error as exc:
        raise ValueError(f"Invalid rule: `{rule}`, its pattern does not compile: {exc}") from None
    return Rule(
        pattern,
        source=source,
        replacement=m.group(4),
        to_lower=m.group(6) == "L",
        to_upper=m.group(6) == "U",
    )


def _java_replacement(match: re.Match[str], replacement: str) -> str:
    """Java's Matcher.appendReplacement text for one match, after Kafka's
    escapeLiteralBackReferences: ``\\x`` is a literal x; ``$n`` is group n, reading further
    digits while they still name a group; ``${name}`` a named group; and (Kafka's addition)
    a ``$n`` whose first digit names no group, in a pattern that has groups, is literal."""
    groups = match.re.groups
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        i += 1
        if c == "\\":
            if i == len(replacement):
                raise ValueError("character to be escaped is missing")
            out.append(replacement[i])
            i += 1
        elif c != "$":
            out.append(c)
        elif i < len(replacement) and replacement[i] == "{":
            end = replacement.find("}", i)
            if end < 0:
                raise ValueError("named capturing group is missing trailing '}'")
            out.append(match.group(replacement[i + 1 : end]) or "")
            i = end + 1
        elif i < len(replacement) and replacement[i].isdigit():
            ref = int(replacement[i])
            if 0 < groups < ref:
                out.append("$")  # Kafka escaped it: the digits follow as text
                continue
            if ref > groups:
                raise ValueError(f"No group {ref}")
            i += 1
            while i < len(replacement) and replacement[i].isdigit():
                longer = ref * 10 + int(replacement[i])
                if longer > groups:
                    break
                ref = longer
                i += 1
            out.append(match.group(ref) or "")
        else:
            raise ValueError("Illegal group reference")
    return "".join(out)


# The attribute keywords of Java's RFC 2253 form (X500Principal.RFC2253); any other
# attribute is written as its OID and the hex of its DER value, ``1.2.840.113549.1.9.1=#16...``.
_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.6": "C",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# The names ``ssl.SSLSocket.getpeercert()`` gives them (OpenSSL's long names).
_LONG_NAMES = {
    "commonName": "CN",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_EMAIL_OID = "1.2.840.113549.1.9.1"
_IA5_STRING = 22


def distinguished_name(certificate: bytes | Mapping[str, Any]) -> str:
    """The subject of a certificate as Java's ``X500Principal.getName()`` gives it (RFC
    2253): the most specific RDN first, so a subject issued as ``C=US, O=acme, CN=alice``
    is ``CN=alice,O=acme,C=US``. ``certificate`` is DER (``getpeercert(binary_form=True)``,
    read with the ``cryptography`` package) or the dict of ``getpeercert()``, whose names
    beyond Java's keywords and emailAddress are written by their OpenSSL names."""
    if isinstance(certificate, bytes):
        return _from_der(certificate)
    rdns = certificate.get("subject", ())
    return ",".join("+".join(_dict_attribute(k, v) for k, v in rdn) for rdn in reversed(rdns))


def _from_der(der: bytes) -> str:
    from cryptography import x509

    subject = x509.load_der_x509_certificate(der).subject
    rdns = []
    for rdn in reversed(subject.rdns):
        avas = []
        for attribute in rdn:
            oid = attribute.oid.dotted_string
            value = attribute.value
            keyword = _KEYWORDS.get(oid)
            if keyword is not None and isinstance(value, str):
                avas.append(f"{keyword}={_escape(value)}")
            else:
                tag = getattr(getattr(attribute, "_type", None), "value", 12)  # UTF8String
                avas.append(f"{oid}=#{_der_value(tag, value)}")
        rdns.append("+".join(avas))
    return ",".join(rdns)


def _dict_attribute(name: str, value: str) -> str:
    if name == "emailAddress":
        return f"{_EMAIL_OID}=#{_der_value(_IA5_STRING, value)}"
    return f"{_LONG_NAMES.get(name, name)}={_escape(value)}"


def _der_value(tag: int, value: str | bytes) -> str:
    """The hex of a string attribute's DER encoding (tag, length, contents)."""
    if isinstance(value, bytes):
        body = b"\x00" + value if tag == 3 else value  # a BIT STRING's unused-bits octet
    elif tag == 30:  # BMPString
        body = value.encode("utf-16-be")
    elif tag == 28:  # UniversalString
        body = value.encode("utf-32-be")
    elif tag == 12:
        body = value.encode()
    else:
        body = value.encode("latin-1")
    n = len(body)
    length = bytes([n]) if n < 0x80 else _long_length(n)
    return (bytes([tag]) + length + body).hex()


def _long_length(n: int) -> bytes:
    octets = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(octets)]) + octets


def _escape(value: str) -> str:
    """An attribute value as RFC 2253 (and Java) write it: ``,+"\\<>;`` escaped, and a
    leading ``#`` or space and a trailing space."""
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
