"""The host proxy on loopback, without a container: the relay runs in a thread here, the
program is an httpx client or a raw socket, every upstream is a server the test started,
and every name goes through :class:`LoopbackNetwork` (nothing leaves the machine)."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from sandcrew.sandbox import EgressPolicy
from sandcrew.sandbox._egress_proxy import EgressChannel, egress_proxy
from sandcrew.sandbox._egress_tls import CertificateAuthority
from sandcrew.sandbox._inside.relay import Relay
from sandcrew.testing import LoopbackNetwork
from tests.egress_servers import Tripwire, Upstream, tripwire, upstream_server

TOKEN = "s3cr3t-t0ken-that-must-not-leak"
PUBLIC = "203.0.113.10"
OTHER_PUBLIC = "203.0.113.20"
DENIED_PUBLIC = "203.0.113.66"


@pytest.fixture(scope="module")
def test_authority() -> CertificateAuthority:
    """The authority of the test's HTTPS upstreams (stands in for a public one)."""
    return CertificateAuthority("sandcrew test upstream authority")


@contextmanager
def through_proxy(
    policy: EgressPolicy, network: LoopbackNetwork
) -> Iterator[tuple[EgressChannel, str]]:
    """The run's channel and the relay's ``http://127.0.0.1:PORT`` in front of it."""
    channel = egress_proxy().open_channel(policy, network=network)
    channel.peer_uid = os.getuid()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    relay = Relay(listener, channel.socket_path)
    threading.Thread(target=relay.serve, daemon=True).start()
    try:
        yield channel, f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        channel.close()


def client_trusting(pem: bytes, proxy: str) -> httpx.Client:
    context = ssl.create_default_context(cadata=pem.decode("ascii"))
    return httpx.Client(proxy=proxy, verify=context, timeout=10.0, follow_redirects=False)


@contextmanager
def world(
    test_authority: CertificateAuthority,
) -> Iterator[tuple[Upstream, Upstream, Tripwire, LoopbackNetwork]]:
    """``allowed.test`` and ``other.test`` (HTTPS), ``denied.test`` and the metadata address
    routed to a tripwire."""
    with (
        upstream_server("allowed.test", authority=test_authority) as allowed,
        upstream_server("other.test", authority=test_authority) as other,
        tripwire() as wire,
    ):
        network = LoopbackNetwork(
            hosts={
                "allowed.test": PUBLIC,
                "other.test": OTHER_PUBLIC,
                "denied.test": DENIED_PUBLIC,
                "metadata.test": "169.254.169.254",
            },
            routes={
                (PUBLIC, 443): allowed.port,
                (OTHER_PUBLIC, 443): other.port,
                (DENIED_PUBLIC, 443): wire.port,
                ("169.254.169.254", 443): wire.port,
                ("169.254.169.254", 80): wire.port,
            },
            trusted_pem=test_authority.certificate_pem,
        )
        yield allowed, other, wire, network


def test_an_allowed_host_works_and_is_logged(test_authority: CertificateAuthority) -> None:
    with (
        world(test_authority) as (_allowed, _other, _wire, network),
        through_proxy(EgressPolicy(allow=("allowed.test",)), network) as (channel, proxy),
    ):
        with client_trusting(test_authority.certificate_pem, proxy) as client:
            answer = client.get("https://allowed.test/hello")
        log = channel.close()
    assert answer.status_code == 200
    assert answer.text == "hello from allowed.test\n"
    [event] = log.events
    assert (event.host, event.port, event.method, event.decision) == (
        "allowed.test",
        443,
        "CONNECT",
        "allowed",
    )
    assert event.status == 200
    assert event.bytes_sent > 0
    assert event.bytes_received > 0
    assert network.dials == [(PUBLIC, 443)]


def test_a_denied_host_is_never_resolved_nor_dialled(test_authority: CertificateAuthority) -> None:
    with (
        world(test_authority) as (_allowed, _other, wire, network),
        through_proxy(EgressPolicy(allow=("allowed.test",)), network) as (channel, proxy),
    ):
        with client_trusting(test_authority.certificate_pem, proxy) as client:
            with pytest.raises(httpx.ProxyError, match="403"):
                client.get("https://denied.test/")
            plain = client.get("http://denied.test/")
        log = channel.close()
    assert plain.status_code == 403
    assert "not on the allow-list" in plain.text
    assert "denied.test" not in network.lookups
    assert network.dials == []
    assert wire.connections == 0
    assert [(event.method, event.decision, event.status) for event in log.events] == [
        ("CONNECT", "denied", 403),
        ("GET", "denied", 403),
    ]
    assert all("not on the allow-list" in event.reason for event in log.events)


def test_past_its_event_cap_a_run_s_log_counts_what_it_dropped(
    test_authority: CertificateAuthority,
) -> None:
    policy = EgressPolicy(allow=("allowed.test",), max_events=2)
    with (
        world(test_authority) as (_allowed, _other, _wire, network),
        through_proxy(policy, network) as (channel, proxy),
    ):
        with client_trusting(test_authority.certificate_pem, proxy) as client:
            statuses = [client.get("http://denied.test/").status_code for _ in range(5)]
        log = channel.close()
    assert statuses == [403] * 5  # every request is decided; only its record is capped
    assert len(log.events) == 2
    assert log.dropped == 3
    assert "3 more" in "\n".join(log.runner_lines())


def test_an_allowed_name_that_resolves_to_the_metadata_address_is_refused(
    test_authority: CertificateAuthority,
) -> None:
    policy = EgressPolicy(allow=("metadata.test",))
    with (
        world(test_authority) as (_allowed, _other, wire, network),
        through_proxy(policy, network) as (channel, proxy),
    ):
        with client_trusting(test_authority.certificate_pem, proxy) as client:
            answer = client.get("http://metadata.test/latest/meta-data/")
            with pytest.raises(httpx.ProxyError, match="403"):
                client.get("https://metadata.test/")
            direct = client.get("http://169.254.169.254/latest/meta-data/")
        log = channel.close()
    assert answer.status_code == 403
    assert "169.254.0.0/16" in answer.text
    assert direct.status_code == 403  # the address itself is not on the list
    assert network.dials == []
    assert wire.connections == 0
    assert [event.decision for event in log.events] == ["denied"] * 3


def test_raw_tcp_through_connect_is_refused(test_authority: CertificateAuthority) -> None:
    with (
        world(test_authority) as (allowed, _other, _wire, network),
        through_proxy(EgressPolicy(allow=("allowed.test",)), network) as (channel, proxy),
    ):
        port = int(proxy.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
            assert raw.recv(1024).startswith(b"HTTP/1.1 200")
            raw.sendall(b"SSH-2.0-OpenSSH_9.6\r\n" + b"x" * 100)
            assert raw.recv(1024) == b""
        log = channel.close()
    [event] = log.events
    assert event.decision == "denied"
    assert "TLS" in event.reason
    assert network.dials == []
    assert allowed.requests == []


def test_a_tunnel_whose_tls_names_another_server_is_refused(
    test_authority: CertificateAuthority,
) -> None:
    with (
        world(test_authority) as (allowed, other, _wire, network),
        through_proxy(EgressPolicy(allow=("allowed.test",)), network) as (channel, proxy),
    ):
        port = int(proxy.rsplit(":", 1)[1])
        context = ssl.create_default_context(cadata=test_authority.certificate_pem.decode())
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
            assert raw.recv(1024).startswith(b"HTTP/1.1 200")
            with pytest.raises((ssl.SSLError, OSError)):
                context.wrap_socket(raw, server_hostname="other.test")
        log = channel.close()
    [event] = log.events
    assert event.decision == "denied"
    assert "for other.test, the tunnel for allowed.test" in event.reason
    assert network.dials == []
    assert allowed.requests == []
    assert other.requests == []


def test_the_secret_header_reaches_only_its_host(
    test_authority: CertificateAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_EGRESS_TOKEN", TOKEN)
    policy = EgressPolicy(
        allow=("other.test",),
        secret_headers=("allowed.test=Authorization: Bearer {env:TEST_EGRESS_TOKEN}",),
    )
    with (
        world(test_authority) as (allowed, other, _wire, network),
        through_proxy(policy, network) as (channel, proxy),
    ):
        trust = channel_trust(channel, test_authority)
        with client_trusting(trust, proxy) as client:
            own = client.get(
                "https://allowed.test/headers", headers={"Authorization": "Bearer mine"}
            )
            redirect = client.get("https://allowed.test/redirect?to=https://other.test/headers")
            followed = client.get(redirect.headers["location"])
            echoed = client.get("https://allowed.test/echo")
            spoofed = client.get("https://other.test/headers", headers={"Host": "allowed.test"})
        log = channel.close()
    assert own.status_code == 200
    # The program's own header was replaced; the upstream's echo of the secret is masked.
    assert lowered(own.json())["authorization"] == "*" * len(f"Bearer {TOKEN}")
    assert allowed.header_values("Authorization") == [f"Bearer {TOKEN}"] * 3
    assert redirect.status_code == 302  # relayed, not followed
    assert followed.status_code == 200
    assert spoofed.status_code == 200
    assert other.header_values("Authorization") == []
    assert TOKEN not in echoed.text
    assert TOKEN not in echoed.headers["x-echo"]
    assert echoed.text == "you sent: " + "*" * len(f"Bearer {TOKEN}") + "\n"
    injected = [event.injected for event in log.events if event.host == "allowed.test"]
    assert injected == [("Authorization",)] * 3
    assert TOKEN not in log.model_dump_json()


def test_a_spoofed_host_inside_an_intercepted_tunnel_gets_no_secret(
    test_authority: CertificateAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_EGRESS_TOKEN", TOKEN)
    policy = EgressPolicy(
        secret_headers=("allowed.test=Authorization: Bearer {env:TEST_EGRESS_TOKEN}",)
    )
    with (
        world(test_authority) as (allowed, _other, _wire, network),
        through_proxy(policy, network) as (channel, proxy),
    ):
        with client_trusting(channel_trust(channel), proxy) as client:
            answer = client.get("https://allowed.test/headers", headers={"Host": "evil.test"})
        log = channel.close()
    assert answer.status_code == 421
    assert allowed.requests == []
    assert [event.decision for event in log.events] == ["denied"]


def test_a_plain_http_secret_goes_to_its_host_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_EGRESS_TOKEN", TOKEN)
    with upstream_server("model.test") as model, upstream_server("else.test") as other:
        network = LoopbackNetwork(
            hosts={"model.test": PUBLIC, "else.test": OTHER_PUBLIC},
            routes={(PUBLIC, 8000): model.port, (OTHER_PUBLIC, 8000): other.port},
        )
        policy = EgressPolicy(
            allow=("else.test:8000",),
            secret_headers=("http://model.test:8000=X-Api-Key: {env:TEST_EGRESS_TOKEN}",),
        )
        with through_proxy(policy, network) as (channel, proxy):
            with httpx.Client(proxy=proxy, timeout=10.0) as client:
                first = client.get("http://model.test:8000/headers")
                second = client.get(
                    "http://else.test:8000/headers", headers={"Host": "model.test:8000"}
                )
            log = channel.close()
    assert model.header_values("X-Api-Key") == [TOKEN]
    assert lowered(first.json())["x-api-key"] == "*" * len(TOKEN)
    assert other.header_values("X-Api-Key") == []
    assert "x-api-key" not in lowered(second.json())
    assert lowered(second.json())["host"] == "else.test:8000"
    assert [event.injected for event in log.events] == [("X-Api-Key",), ()]


def test_a_connection_from_another_uid_is_refused(test_authority: CertificateAuthority) -> None:
    with (
        world(test_authority) as (_allowed, _other, _wire, network),
        through_proxy(EgressPolicy(allow=("allowed.test",)), network) as (channel, _proxy),
    ):
        channel.peer_uid = os.getuid() + 1
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.settimeout(10)
            raw.connect(channel.socket_path)
            with contextlib.suppress(BrokenPipeError):  # closed before it was written
                raw.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
            assert received_until_closed(raw) == b""
        log = channel.close()
    assert log.events == ()
    assert network.lookups == []


def test_a_closed_proxy_fails_closed(test_authority: CertificateAuthority) -> None:
    with (
        world(test_authority) as (allowed, _other, _wire, network),
        through_proxy(EgressPolicy(allow=("allowed.test",)), network) as (channel, proxy),
    ):
        channel.close()
        failures = httpx.TransportError  # refused, reset or closed: nothing went through
        with (
            client_trusting(test_authority.certificate_pem, proxy) as client,
            pytest.raises(failures),
        ):
            client.get("https://allowed.test/hello")
    assert allowed.requests == []
    assert not os.path.exists(channel.socket_path)


def channel_trust(channel: EgressChannel, *also: CertificateAuthority) -> bytes:
    """The trust bundle the channel gives its run (host roots and the run's authority), and
    the test's upstream authority standing in for the public ones."""
    with open(os.path.join(channel.folder, "trust.pem"), "rb") as handle:
        return handle.read() + b"".join(authority.certificate_pem for authority in also)


def received_until_closed(sock: socket.socket) -> bytes:
    """What the peer sent before it closed (a reset counts as closed)."""
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def lowered(headers: dict[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def test_oversized_heads_too_many_connections_and_idle_tunnels_are_bounded(
    test_authority: CertificateAuthority,
) -> None:
    policy = EgressPolicy(allow=("allowed.test",), max_connections=1, idle_seconds=3.0)
    with (
        world(test_authority) as (_allowed, _other, _wire, network),
        through_proxy(policy, network) as (channel, proxy),
    ):
        port = int(proxy.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as oversized:
            oversized.sendall(
                b"CONNECT allowed.test:443 HTTP/1.1\r\nX-Padding: " + b"a" * 33_000 + b"\r\n\r\n"
            )
            refused = received_until_closed(oversized)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as held:
            held.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
            assert held.recv(1024).startswith(b"HTTP/1.1 200")
            with socket.create_connection(("127.0.0.1", port), timeout=10) as second:
                second.sendall(b"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
                crowded = received_until_closed(second)
            # The held tunnel sends nothing: the proxy closes it once it has been idle.
            assert received_until_closed(held) == b""
        log = channel.close()
    assert refused.startswith(b"HTTP/1.1 431")
    assert crowded.startswith(b"HTTP/1.1 503")
    assert b"too many connections" in crowded
    reasons = [event.reason for event in log.events]
    assert any("unreadable request" in reason for reason in reasons)
