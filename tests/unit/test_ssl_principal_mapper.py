"""ssl.principal.mapping.rules as Kafka's SslPrincipalMapperTest holds them, and the
distinguished name of a certificate as Java's X500Principal.getName() writes it."""

from __future__ import annotations

import pytest

from purgatory.broker.security.ssl_principal_mapper import (
    NoMatchingRule,
    SslPrincipalMapper,
    distinguished_name,
)


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ],
)
def test_kafkas_valid_rules_parse(rules: str) -> None:
    SslPrincipalMapper.from_rules(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ],
)
def test_kafkas_invalid_rules_raise_value_error_naming_the_rule(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper.from_rules(rules)


def test_a_pattern_that_is_not_a_regular_expression_is_refused_naming_the_rule() -> None:
    with pytest.raises(ValueError, match=r"Invalid rule: `RULE:\(unclosed/\$1/`"):
        SslPrincipalMapper.from_rules("RULE:(unclosed/$1/")


def test_kafkas_mapping_cases() -> None:
    mapper = SslPrincipalMapper.from_rules(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert (
        mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    )


@pytest.mark.parametrize(
    ("expected", "rules"),
    [
        ("[]", ""),
        ("[DEFAULT]", "DEFAULT"),
        ("[RULE:/]", "RULE://"),
        ("[RULE:/.*]", "RULE:/.*/"),
        ("[RULE:/.*/L]", "RULE:/.*/L"),
        ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
        ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
        ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
        ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
        (
            "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
            "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
        ),
        # empty rules are ignored
        ("[]", ",   , , ,      , , ,   "),
        ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
        ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
        ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
        # escape sequences
        ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
        ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
        # rules rule
        (
            "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, "
            "DEFAULT, /DEFAULT, DEFAULT]",
            "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
            "/DEFAULT/,DEFAULT",
        ),
    ],
)
def test_kafkas_rule_splitting(expected: str, rules: str) -> None:
    assert str(SslPrincipalMapper.from_rules(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_kafkas_comma_with_whitespace() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_a_name_no_rule_matches_raises_no_matching_rule() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=eng$/$1/")
    assert mapper.name("CN=alice,OU=eng") == "alice"
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=bob,OU=ops"):
        mapper.name("CN=bob,OU=ops")


def test_a_group_reference_past_the_groups_is_literal_as_kafka_escapes_it() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),.*$/$1@$4/")
    assert mapper.name("CN=alice,O=acme") == "alice@$4"
    # $12 with one group is group 1 then "2", as Java reads it
    assert SslPrincipalMapper.from_rules("RULE:^CN=(.*?),.*$/$12/").name("CN=a,O=b") == "a2"


def test_the_unset_rules_are_default() -> None:
    assert SslPrincipalMapper(None).name("CN=alice,O=acme") == "CN=alice,O=acme"


def test_the_distinguished_name_lists_the_most_specific_rdn_first_as_java_does() -> None:
    trustme = pytest.importorskip("trustme")
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    # The subject sequence as issued: C, O, OU, CN, then an email address (no keyword).
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "acme, inc"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
            x509.NameAttribute(NameOID.COMMON_NAME, "alice"),
            x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@x.io"),
        ]
    )
    key = ec.generate_private_key(ec.SECP256R1())
    ca = trustme.CA()
    issuer_key = serialization.load_pem_private_key(ca.private_key_pem.bytes(), None)
    issuer = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    now = issuer.not_valid_before_utc
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(issuer.not_valid_after_utc)
        .sign(issuer_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    der = cert.public_bytes(serialization.Encoding.DER)
    # What Java's X500Principal.getName() gives for this certificate (IA5String 0x16).
    expected = "1.2.840.113549.1.9.1=#16066140782e696f,CN=alice,OU=eng,O=acme\\, inc,C=US"
    assert distinguished_name(der) == expected
    as_python_gives_it = {
        "subject": (
            (("countryName", "US"),),
            (("organizationName", "acme, inc"),),
            (("organizationalUnitName", "eng"),),
            (("commonName", "alice"),),
            (("emailAddress", "a@x.io"),),
        )
    }
    assert distinguished_name(as_python_gives_it) == expected
