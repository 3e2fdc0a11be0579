"""The egress policy alone: entries, wildcards, default ports, secret headers, ranges."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pytest

from sandcrew.core import InvalidSettings, UserError
from sandcrew.sandbox import BatchSandbox, EgressPolicy, HostRule, SandboxConfig, SecretHeader
from sandcrew.sandbox._egress_policy import (
    parse_host_rule,
    parse_secret_header,
    refused_address,
)
from sandcrew.sandbox._tls_hello import NotAClientHello, server_name
from sandcrew.settings import load_settings


@pytest.mark.parametrize(
    ("text", "host", "ports"),
    [
        ("pypi.org", "pypi.org", (443, 80)),
        ("PyPI.org.", "pypi.org", (443, 80)),
        ("*.example.org", "*.example.org", (443, 80)),
        ("localhost:11434", "localhost", (11434,)),
        ("[2001:db8::1]:8443", "2001:db8::1", (8443,)),
        ("192.0.2.7", "192.0.2.7", (443, 80)),
        ("bücher.example", "xn--bcher-kva.example", (443, 80)),
    ],
)
def test_entries_are_read(text: str, host: str, ports: tuple[int, ...]) -> None:
    rule = parse_host_rule(text)
    assert (rule.host, rule.ports) == (host, ports)
    assert parse_host_rule(str(rule)) == rule


@pytest.mark.parametrize(
    "text",
    [
        "",
        "*",
        "*.org",
        "a*.example.org",
        "example.org:0",
        "example.org:99999",
        "2001:db8::1",
        "exa mple.org",
        "-bad.org",
        "*.192.0.2.1",
    ],
)
def test_bad_entries_are_refused(text: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each names its own problem
        parse_host_rule(text)


def test_a_wildcard_covers_subdomains_only() -> None:
    policy = EgressPolicy(allow=("*.example.org",))
    assert policy.decide("api.example.org", 443).allowed
    assert policy.decide("a.b.example.org", 80).allowed
    assert not policy.decide("example.org", 443).allowed
    assert not policy.decide("evilexample.org", 443).allowed
    assert not policy.decide("api.example.org", 8080).allowed


def test_the_decision_names_the_list() -> None:
    decision = EgressPolicy(allow=("pypi.org", "localhost:11434")).decide("evil.test", 443)
    assert not decision.allowed
    assert decision.reason == (
        "evil.test:443 is not on the allow-list (allowed: pypi.org, localhost:11434)"
    )


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "::1",
        "::",
        "fe80::1",
        "fd00::1",
        "ff02::1",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",
        "2002:a9fe:a9fe::1",
    ],
)
def test_private_and_reserved_addresses_are_refused(address: str) -> None:
    assert refused_address(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["203.0.113.10", "151.101.0.223", "2a04:4e42::223"])
def test_public_addresses_pass(address: str) -> None:
    assert refused_address(ipaddress.ip_address(address)) is None


def test_a_secret_header_is_read_from_the_environment_and_files(tmp_path: Path) -> None:
    secret_file = tmp_path / "token"
    secret_file.write_text("from-a-file\n")
    by_env = parse_secret_header("api.example.com=Authorization: Bearer {env:API_TOKEN}")
    by_file = parse_secret_header(f"http://localhost:8000=X-Key: {{file:{secret_file}}}")
    assert (by_env.scheme, by_env.host, by_env.port, by_env.name) == (
        "https",
        "api.example.com",
        443,
        "Authorization",
    )
    assert by_env.resolve({"API_TOKEN": "abc"}) == "Bearer abc"
    assert (by_file.scheme, by_file.port) == ("http", 8000)
    assert by_file.resolve({}) == "from-a-file"
    assert "abc" not in str(by_env)
    assert "{env:API_TOKEN}" in str(by_env)
    with pytest.raises(ValueError, match="API_TOKEN is not set"):
        by_env.resolve({})
    with pytest.raises(ValueError, match="line break"):
        by_env.resolve({"API_TOKEN": "a\r\nX-Injected: 1"})


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("api.example.com=Authorization: Bearer sk-literal", "literal secret"),
        ("api.example.com=Authorization: {env:A} {oops}", "brace"),
        ("api.example.com=Host: {env:A}", "does not let"),
        ("*.example.com=X-Key: {env:A}", "one host"),
        ("api.example.com", "HOST"),
        ("api.example.com=no colon {env:A}", "header name"),
        ("api.example.com=X-Key: {env:1A}", "not a variable"),
    ],
)
def test_bad_secret_headers_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_secret_header(text)


def test_a_host_with_a_secret_is_allowed_on_its_port_only() -> None:
    policy = EgressPolicy(secret_headers=("api.example.com=X-Key: {env:A}",))
    assert policy.decide("api.example.com", 443).secret is not None
    assert not policy.decide("api.example.com", 80).allowed


def test_the_policy_in_the_settings() -> None:
    config = SandboxConfig(egress={"allow": ["pypi.org"]})
    assert config.egress == EgressPolicy(allow=(HostRule(host="pypi.org"),))
    with pytest.raises(InvalidSettings, match="network"):
        SandboxConfig(network=True, egress={"allow": ["pypi.org"]})
    with pytest.raises(InvalidSettings, match="literal secret"):
        SandboxConfig(egress={"secret_headers": ["a.test=X-Key: plain"]})
    with_secret = SandboxConfig(egress={"secret_headers": ["a.test=X-Key: {env:K}"]})
    assert with_secret.egress is not None
    assert isinstance(with_secret.egress.secret_headers[0], SecretHeader)


def test_the_policy_from_a_settings_file_and_batch_isolation_refusing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = tmp_path / "sandcrew.toml"
    config_file.write_text(
        "[sandbox.egress]\n"
        'allow = ["pypi.org", "*.example.org:8443"]\n'
        'secret_headers = ["api.test=Authorization: Bearer {env:API_TEST_TOKEN}"]\n',
        encoding="utf-8",
    )
    for name in [name for name in os.environ if name.startswith("SANDCREW_")]:
        monkeypatch.delenv(name)
    egress = load_settings(config_path=config_file).sandbox.egress
    assert egress is not None
    assert list(egress.entries) == [
        "pypi.org",
        "*.example.org:8443",
        "api.test:443",  # a secret's host, on the one port its header goes to
    ]
    with pytest.raises(UserError, match="batch isolation runs many tasks in one container"):
        BatchSandbox(SandboxConfig(egress=egress))


def _client_hello(name: bytes | None) -> bytes:
    extensions = b""
    if name is not None:
        entry = b"\x00" + len(name).to_bytes(2, "big") + name
        listing = len(entry).to_bytes(2, "big") + entry
        extensions = b"\x00\x00" + len(listing).to_bytes(2, "big") + listing
    body = (
        b"\x03\x03"
        + b"\x00" * 32
        + b"\x00"
        + b"\x00\x02\x13\x01"
        + b"\x01\x00"
        + len(extensions).to_bytes(2, "big")
        + extensions
    )
    handshake = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + len(handshake).to_bytes(2, "big") + handshake


def test_the_server_name_of_a_client_hello() -> None:
    assert server_name(_client_hello(b"Example.ORG")) == "example.org"
    assert server_name(_client_hello(None)) is None


@pytest.mark.parametrize(
    "record",
    [
        b"GET / HTTP/1.1\r\n",
        b"\x16\x03\x01\x00\x00",
        b"\x16\x03\x01\xff\xff" + b"\x01",
        _client_hello(b"example.org")[:-3],
        b"\x16\x03\x01\x00\x04\x02\x00\x00\x00",
        _client_hello(b"\xff\xfe.example"),
    ],
    ids=["http", "empty", "oversized", "truncated", "server-hello", "not-ascii"],
)
def test_hostile_client_hellos_are_refused(record: bytes) -> None:
    with pytest.raises(NotAClientHello):
        server_name(record)


def test_a_policy_from_text_lists_every_problem_at_once() -> None:
    with pytest.raises(InvalidSettings) as raised:
        EgressPolicy.from_text(
            allow=["pypi.org", "*.com"], secret_headers=["a.test=X-Key: sk-literal-value"]
        )
    message = str(raised.value)
    assert message.startswith("invalid network policy: ")
    assert "allow.1: '*.com': a wildcard" in message
    assert "secret_headers.0: a secret header's value must come from" in message
    assert "sk-literal-value" not in message


def test_a_server_policy_is_narrowed_to_the_entries_a_client_names_never_widened() -> None:
    ceiling = EgressPolicy.from_text(
        allow=["pypi.org", "*.example.org:8443"],
        secret_headers=["api.test=Authorization: Bearer {env:TOKEN}", "pypi.org=X-Key: {env:K}"],
    )
    # The hosts of secret headers that no entry covers are choices of their own.
    assert ceiling.entries == ("pypi.org", "*.example.org:8443", "api.test:443")
    # A client may name an entry as written, or its host.
    assert ceiling.entries_naming("api.test") == ("api.test:443",)
    assert ceiling.entries_naming("*.example.org:8443") == ("*.example.org:8443",)
    assert ceiling.entries_naming("evil.org") == ()

    index = ceiling.narrowed(["pypi.org"])
    assert index.entries == ("pypi.org",)
    assert [header.host for header in index.secret_headers] == ["pypi.org"]
    assert not index.decide("api.test", 443).allowed
    assert not index.decide("a.example.org", 8443).allowed

    api = ceiling.narrowed(["api.test:443"])
    assert api.allow == ()
    assert api.decide("api.test", 443).allowed
    assert not api.decide("pypi.org", 443).allowed

    assert ceiling.narrowed([]).entries == ()
    with pytest.raises(ValueError, match=r"not allowed here: evil\.org, pypi\.org:80 \(allowed: "):
        ceiling.narrowed(["evil.org", "pypi.org:80"])
