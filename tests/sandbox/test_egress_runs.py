"""Network by policy on real Docker: programs in hardened containers reach allowed hosts
through the host proxy and nothing else; secret headers never reach the container.

Every name goes through :class:`LoopbackNetwork` to a server this test started on
loopback (denied names to tripwires); direct probes use documentation addresses, which
fail inside the container before any packet exists.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import docker
import pytest

from sandcrew.sandbox import (
    DockerSandbox,
    ExecutionResult,
    OutputEvent,
    SandboxConfig,
    SessionLimits,
)
from sandcrew.sandbox._egress_proxy import egress_proxy
from sandcrew.sandbox._egress_tls import CertificateAuthority
from sandcrew.testing import LoopbackNetwork
from tests.egress_servers import Tripwire, Upstream, tripwire, upstream_server
from tests.sandbox.helpers import our_containers, waiting_members

pytestmark = pytest.mark.docker

TOKEN = "tok-9f2c71d5e0b84a6b-must-stay-outside"
OTHER_TOKEN = "tok-other-run-3141592653589793"
PUBLIC = "203.0.113.10"
API_PUBLIC = "203.0.113.11"
DENIED_PUBLIC = "203.0.113.66"


@pytest.fixture(scope="module")
def test_authority() -> CertificateAuthority:
    return CertificateAuthority("sandcrew test upstream authority")


@contextmanager
def world(
    authority: CertificateAuthority,
) -> Iterator[tuple[Upstream, Upstream, Tripwire, LoopbackNetwork]]:
    with (
        upstream_server("allowed.test", authority=authority) as allowed,
        upstream_server("api.test", authority=authority) as api,
        tripwire() as wire,
    ):
        network = LoopbackNetwork(
            hosts={
                "allowed.test": PUBLIC,
                "api.test": API_PUBLIC,
                "denied.test": DENIED_PUBLIC,
                "dns.test": DENIED_PUBLIC,
                "metadata.test": "169.254.169.254",
            },
            routes={
                (PUBLIC, 443): allowed.port,
                (API_PUBLIC, 443): api.port,
                (DENIED_PUBLIC, 443): wire.port,
                (DENIED_PUBLIC, 80): wire.port,
                ("169.254.169.254", 80): wire.port,
                ("169.254.169.254", 443): wire.port,
            },
            trusted_pem=authority.certificate_pem,
        )
        yield allowed, api, wire, network


async def run(
    docker_client: docker.DockerClient,
    network: LoopbackNetwork,
    code: str,
    *,
    egress: dict[str, object],
    files: dict[str, bytes] | None = None,
    on_output: object = None,
) -> ExecutionResult:
    config = SandboxConfig(timeout=20.0, egress=egress)
    async with DockerSandbox(
        config, docker_client=docker_client, egress_network=network
    ) as sandbox:
        return await sandbox.run(code, files=files, on_output=on_output)  # type: ignore[arg-type]


# A program's requests, through the proxy its environment names, trusting the test's
# authority (the stand-in for public ones) besides the variables' bundle.
_FETCH = r"""
import json, os, ssl, sys, urllib.request, urllib.error

def context():
    ctx = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE"))
    ctx.load_verify_locations("/workspace/upstream-ca.pem")
    return ctx

def fetch(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=context()), NoRedirect()
    )
    try:
        with opener.open(request, timeout=15) as answer:
            return answer.status, answer.read().decode(), dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)
    except OSError as error:
        return None, str(error), {}

class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None
"""


async def test_an_allowed_host_works_and_a_denied_one_is_refused_and_logged(
    docker_client: docker.DockerClient, test_authority: CertificateAuthority
) -> None:
    code = _FETCH + (
        "print(json.dumps([fetch('https://allowed.test/hello'), fetch('https://denied.test/'),"
        " fetch('http://denied.test/'), fetch('https://dns.test/dns-query?name=example.org')]))"
    )
    with world(test_authority) as (allowed, _api, wire, network):
        result = await run(
            docker_client,
            network,
            code,
            egress={"allow": ["allowed.test"]},
            files={"upstream-ca.pem": test_authority.certificate_pem},
        )
    assert result.exit_code == 0, result.stderr
    ok, denied_tls, denied_plain, doh = json.loads(result.stdout)
    assert ok[:2] == [200, "hello from allowed.test\n"]
    assert "403" in denied_tls[1]
    assert denied_plain[0] == 403
    assert "not on the allow-list" in denied_plain[1]
    assert "403" in doh[1]  # DNS over HTTPS to a host that is not allowed
    assert [request.path for request in allowed.requests] == ["/hello"]
    assert wire.connections == 0
    assert "denied.test" not in network.lookups
    assert "dns.test" not in network.lookups
    assert result.network is not None
    # In the order the requests started (a tunnel's event is recorded when it closes).
    events = [(event.host, event.method, event.decision) for event in result.network.events]
    assert events == [
        ("allowed.test", "CONNECT", "allowed"),
        ("denied.test", "CONNECT", "denied"),
        ("denied.test", "GET", "denied"),
        ("dns.test", "CONNECT", "denied"),
    ]
    message = result.to_runner_message()
    assert "[network]" in message
    assert "denied GET denied.test:80 → 403: denied.test:80 is not on the allow-list" in message


_DIRECT = r"""
import errno, json, socket, urllib.request
outcomes = {}
for name, family, address in (
    ("ipv4", socket.AF_INET, ("192.0.2.1", 80)),
    ("ipv6", socket.AF_INET6, ("2001:db8::1", 443, 0, 0)),
    ("metadata", socket.AF_INET, ("169.254.169.254", 80)),
):
    probe = socket.socket(family, socket.SOCK_STREAM)
    probe.settimeout(5)
    try:
        probe.connect(address)
        outcomes[name] = "connected"
    except OSError as error:
        outcomes[name] = errno.errorcode.get(error.errno, str(error))
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    udp.sendto(b"\x12\x34" + b"\x00" * 10, ("192.0.2.53", 53))
    outcomes["udp53"] = "sent"
except OSError as error:
    outcomes["udp53"] = errno.errorcode.get(error.errno, str(error))
try:
    socket.getaddrinfo("allowed.test", 443)
    outcomes["dns"] = "resolved"
except OSError as error:
    outcomes["dns"] = "failed"
# A program that ignores the proxy variables.
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    direct.open("http://allowed.test/", timeout=5)
    outcomes["no_proxy"] = "reached"
except OSError as error:
    outcomes["no_proxy"] = "failed"
print(json.dumps(outcomes))
"""


async def test_direct_addresses_udp_and_programs_ignoring_the_proxy_reach_nothing(
    docker_client: docker.DockerClient, test_authority: CertificateAuthority
) -> None:
    with world(test_authority) as (allowed, _api, wire, network):
        result = await run(
            docker_client, network, _DIRECT, egress={"allow": ["allowed.test", "metadata.test"]}
        )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == {
        "ipv4": "ENETUNREACH",
        "ipv6": "ENETUNREACH",
        "metadata": "ENETUNREACH",
        "udp53": "ENETUNREACH",
        "dns": "failed",
        "no_proxy": "failed",
    }
    assert allowed.requests == []
    assert wire.connections == 0
    assert result.network is not None
    assert result.network.events == ()  # nothing went through the proxy either


async def test_the_metadata_address_behind_an_allowed_name_and_raw_tcp_are_refused(
    docker_client: docker.DockerClient, test_authority: CertificateAuthority
) -> None:
    code = (
        _FETCH
        + r"""
import socket
metadata = fetch("http://metadata.test/latest/meta-data/")
raw = socket.create_connection(("127.0.0.1", 3128), timeout=10)
raw.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
answer = raw.recv(1024).split(b"\r\n")[0].decode()
raw.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
rest = raw.recv(1024)
sni = socket.create_connection(("127.0.0.1", 3128), timeout=10)
sni.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
sni.recv(1024)
try:
    context().wrap_socket(sni, server_hostname="api.test")
    handshake = "completed"
except OSError:
    handshake = "failed"
print(json.dumps([metadata[0], answer, rest.decode(), handshake]))
"""
    )
    with world(test_authority) as (allowed, api, wire, network):
        result = await run(
            docker_client,
            network,
            code,
            egress={"allow": ["allowed.test", "metadata.test:80"]},
            files={"upstream-ca.pem": test_authority.certificate_pem},
        )
    assert result.exit_code == 0, result.stderr
    metadata, answer, rest, handshake = json.loads(result.stdout)
    assert metadata == 403
    assert answer == "HTTP/1.1 200 Connection established"
    assert rest == ""  # closed: raw TCP does not go through
    assert handshake == "failed"
    assert allowed.requests == []
    assert api.requests == []
    assert wire.connections == 0
    assert network.dials == []
    assert result.network is not None
    reasons = [event.reason for event in result.network.events]
    assert [event.decision for event in result.network.events] == ["denied"] * 3
    assert "169.254.169.254 is in a private or reserved range" in reasons[0]
    assert "TLS" in reasons[1]
    assert "the TLS handshake is for api.test, the tunnel for allowed.test" in reasons[2]


async def test_the_secret_reaches_only_its_host_and_never_the_container(
    docker_client: docker.DockerClient,
    test_authority: CertificateAuthority,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEST_API_TOKEN", TOKEN)
    # The program searches for the secret's distinctive middle part (it does not know it all).
    piece = TOKEN[4:20]
    code = (
        _FETCH
        + f"PIECE = {piece!r}\n"
        + r"""
found = []
for variable, value in os.environ.items():
    if PIECE in value:
        found.append("environment " + variable)
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as handle:
                    if PIECE.encode() in handle.read():
                        found.append(f"/proc/{pid}/{part}")
            except OSError:
                pass
# Every readable file that is not the image's read-only root (which was built before the
# run): the tmpfs folders, Docker's own mounts (/etc/hosts, ...) and the proxy's folder.
image = os.stat("/").st_dev
searched = 0
for folder, folders, names in os.walk("/"):
    if folder.startswith(("/proc", "/sys")):
        folders[:] = []
        continue
    for name in names:
        path = os.path.join(folder, name)
        try:
            status = os.lstat(path)
            if status.st_dev == image or not os.path.isfile(path) or os.path.islink(path):
                continue
            if path == os.path.abspath(sys.argv[0]):
                continue  # this program, which holds the piece it looks for
            with open(path, "rb") as handle:
                searched += 1
                if PIECE.encode() in handle.read(4 << 20):
                    found.append(path)
        except OSError:
            pass
if searched < 4:
    found.append(f"only {searched} files searched")
print("ready", flush=True)
answers = [
    fetch("https://api.test/headers", {"Authorization": "Bearer the-programs-own"}),
    fetch("https://api.test/echo"),
    fetch("https://api.test/redirect?to=https://allowed.test/headers"),
    fetch("https://allowed.test/headers"),
    fetch("https://allowed.test/headers", {"Host": "api.test"}),
]
print(json.dumps({"found": found, "answers": answers}))
"""
    )
    inspected: list[str] = []

    def inspect_while_running(event: OutputEvent) -> None:
        if "ready" in event.text and not inspected:
            for container_id in our_containers(docker_client):
                inspected.append(json.dumps(docker_client.api.inspect_container(container_id)))

    with world(test_authority) as (allowed, api, wire, network):
        result = await run(
            docker_client,
            network,
            code,
            egress={
                "allow": ["allowed.test"],
                "secret_headers": ["api.test=Authorization: Bearer {env:TEST_API_TOKEN}"],
            },
            files={"upstream-ca.pem": test_authority.certificate_pem},
            on_output=inspect_while_running,
        )
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout.split("ready\n", 1)[1])
    assert report["found"] == []
    assert inspected  # the container was inspected while it ran
    assert all(piece not in text for text in inspected)
    own, echo, redirect, followed, spoofed = report["answers"]
    assert own[0] == 200
    assert echo[0] == 200
    assert redirect[0] == 302  # not followed by the proxy
    assert followed[0] == 200
    assert spoofed[0] == 200
    assert api.header_values("Authorization") == [f"Bearer {TOKEN}"] * 3
    assert allowed.header_values("Authorization") == []
    assert piece not in result.stdout
    assert piece not in result.model_dump_json()
    assert echo[1] == "you sent: " + "*" * len(f"Bearer {TOKEN}") + "\n"
    assert wire.connections == 0
    assert result.network is not None
    injected = [event.injected for event in result.network.events if event.host == "api.test"]
    assert injected == [("Authorization",)] * 3


async def test_two_runs_at_once_keep_their_own_secrets(
    docker_client: docker.DockerClient,
    test_authority: CertificateAuthority,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEST_TOKEN_A", TOKEN)
    monkeypatch.setenv("TEST_TOKEN_B", OTHER_TOKEN)

    def program(marker: str) -> str:
        return (
            _FETCH
            + f"MARKER = {marker!r}\n"
            + r"""
import socket
reachable = []
for folder, _, names in os.walk("/"):
    if folder.startswith(("/proc", "/sys")):
        continue
    for name in names:
        path = os.path.join(folder, name)
        if path.endswith(".sock") or name.startswith("proxy"):
            probe = socket.socket(socket.AF_UNIX)
            try:
                probe.connect(path)
                reachable.append(path)
            except OSError:
                pass
statuses = [fetch(f"https://api.test/headers?run={MARKER}")[0] for _ in range(3)]
print(json.dumps({"statuses": statuses, "reachable": reachable}))
"""
        )

    with world(test_authority) as (_allowed, api, _wire, network):
        results = await asyncio.gather(
            *(
                run(
                    docker_client,
                    network,
                    program(marker),
                    egress={"secret_headers": [f"api.test=Authorization: {{env:{variable}}}"]},
                    files={"upstream-ca.pem": test_authority.certificate_pem},
                )
                for marker, variable in (("a", "TEST_TOKEN_A"), ("b", "TEST_TOKEN_B"))
            )
        )
    for result in results:
        assert result.exit_code == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["statuses"] == [200, 200, 200]
        assert report["reachable"] == []  # its own socket is not listable, no other is there
    sent = sorted((seen.path[-1], authorization(seen.headers)) for seen in api.requests)
    assert sent == [("a", TOKEN)] * 3 + [("b", OTHER_TOKEN)] * 3


async def test_a_proxy_that_dies_fails_closed(
    docker_client: docker.DockerClient, test_authority: CertificateAuthority
) -> None:
    code = (
        _FETCH
        + r"""
import time
first = fetch("https://allowed.test/hello")[0]
print("ready", flush=True)
time.sleep(3)
second = fetch("https://allowed.test/hello")
print(json.dumps([first, second[0]]))
"""
    )
    closed = threading.Event()

    def kill_the_proxy(event: OutputEvent) -> None:
        if "ready" in event.text and not closed.is_set():
            egress_proxy().close_channels()
            closed.set()

    with world(test_authority) as (allowed, _api, _wire, network):
        result = await run(
            docker_client,
            network,
            code,
            egress={"allow": ["allowed.test"]},
            files={"upstream-ca.pem": test_authority.certificate_pem},
            on_output=kill_the_proxy,
        )
    assert closed.is_set()
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout.split("ready\n", 1)[1]) == [200, None]
    assert [request.path for request in allowed.requests] == ["/hello"]


def authorization(headers: dict[str, str]) -> str | None:
    return next((value for name, value in headers.items() if name.lower() == "authorization"), None)


async def test_a_session_keeps_its_network_policy_for_its_lifetime(
    docker_client: docker.DockerClient, test_authority: CertificateAuthority
) -> None:
    fetch = "print(json.dumps([fetch('https://allowed.test/a'), fetch('https://denied.test/')]))"
    config = SandboxConfig(timeout=20.0, egress={"allow": ["allowed.test"]})
    with world(test_authority) as (allowed, _api, wire, network):
        async with DockerSandbox(
            config, docker_client=docker_client, egress_network=network
        ) as sandbox:
            session = sandbox.session(limits=SessionLimits(cell_timeout=30))
            async with session:
                await session.put_file("upstream-ca.pem", test_authority.certificate_pem)
                first = await session.run(_FETCH + fetch)
                # A cell can end the relay (its own uid): the supervisor starts it again.
                await session.run(
                    "import os, signal\nfor p in os.listdir('/proc'):\n"
                    "    if p.isdigit() and int(p) != os.getpid():\n"
                    "        try: os.kill(int(p), signal.SIGKILL)\n"
                    "        except OSError: pass"
                )
                await asyncio.sleep(0.5)
                after_kill = await session.run(fetch)
                await session.restart()
                after_restart = await session.run(_FETCH + fetch)
            log = session.network

    for cell in (first, after_kill, after_restart):
        reached, refused = json.loads(cell.stdout)
        assert reached[:2] == [200, "hello from allowed.test\n"], cell
        assert "403" in refused[1]
    assert len(allowed.requests) == 3
    assert wire.connections == 0
    assert log is not None
    assert [event.decision for event in log.events] == ["allowed", "denied"] * 3


async def test_a_pooled_sandbox_runs_a_policy_run_in_a_container_of_its_own(
    docker_client: docker.DockerClient, test_authority: CertificateAuthority
) -> None:
    # A pooled container was started without the run's proxy folder: it must stay unused.
    config = SandboxConfig(timeout=20.0, pool_size=1, egress={"allow": ["allowed.test"]})
    code = _FETCH + 'print(fetch("https://allowed.test/hello")[0])'
    with world(test_authority) as (allowed, _api, _wire, network):
        async with DockerSandbox(
            config, docker_client=docker_client, egress_network=network
        ) as sandbox:
            await sandbox.start()
            for _ in range(600):  # a busy shared engine may take seconds to start it
                waiting = waiting_members(docker_client)
                if waiting:
                    break
                await asyncio.sleep(0.05)
            assert waiting, "the pool never started its container"
            result = await sandbox.run(
                code, files={"upstream-ca.pem": test_authority.certificate_pem}
            )
            assert waiting_members(docker_client) == waiting
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "200\n"
    assert result.run_id not in waiting
    assert [request.path for request in allowed.requests] == ["/hello"]
