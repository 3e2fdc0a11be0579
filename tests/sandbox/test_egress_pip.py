"""`pip install --target` inside a hardened run, from a package index the policy allows.

The index is a PEP 503 "simple" index this test serves on loopback over HTTPS (a throwaway
authority stands in for the public ones) with one small pure-Python wheel it builds; the
name the program asks for maps to it through :class:`LoopbackNetwork`. Nothing leaves
the machine.
"""

from __future__ import annotations

import base64
import hashlib
import io
import ssl
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import docker
import pytest

from sandcrew.sandbox import DockerSandbox, SandboxConfig
from sandcrew.sandbox._egress_tls import CertificateAuthority, load_chain_from_memory
from sandcrew.testing import LoopbackNetwork

pytestmark = pytest.mark.docker

INDEX_HOST = "pypi.test"
INDEX_PUBLIC = "203.0.113.20"
WHEEL_NAME = "sandcrew_probe-1.0-py3-none-any.whl"
GREETING = "hello from an allowed index"


def probe_wheel() -> bytes:
    """A minimal, valid pure-Python wheel: one module and its dist-info."""
    files = {
        "sandcrew_probe/__init__.py": f"GREETING = {GREETING!r}\n".encode(),
        "sandcrew_probe-1.0.dist-info/METADATA": (
            b"Metadata-Version: 2.1\nName: sandcrew-probe\nVersion: 1.0\n"
        ),
        "sandcrew_probe-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: sandcrew-tests\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n"
        ),
    }
    record = []
    for name, content in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(content)}")
    record.append("sandcrew_probe-1.0.dist-info/RECORD,,")
    files["sandcrew_probe-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, content in files.items():
            wheel.writestr(name, content)
    return buffer.getvalue()


@dataclass
class PackageIndex:
    port: int = 0
    paths: list[str] = field(default_factory=list)


@contextmanager
def package_index(authority: CertificateAuthority, wheel: bytes) -> Iterator[PackageIndex]:
    """A simple index on 127.0.0.1 over HTTPS, for INDEX_HOST, serving ``wheel``."""
    index = PackageIndex()
    sha256 = hashlib.sha256(wheel).hexdigest()
    page = (
        f'<!DOCTYPE html><html><body><a href="/files/{WHEEL_NAME}#sha256={sha256}">'
        f"{WHEEL_NAME}</a></body></html>"
    ).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            index.paths.append(self.path)
            if self.path.rstrip("/") == "/simple/sandcrew-probe":
                body, kind = page, "text/html"
            elif self.path == f"/files/{WHEEL_NAME}":
                body, kind = wheel, "application/octet-stream"
            else:
                body, kind = b"not here\n", "text/plain"
                self.send_response(404)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_chain_from_memory(context, authority.leaf_pem(INDEX_HOST))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    index.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()


INSTALL = f"""
import subprocess, sys
installed = subprocess.run(
    [sys.executable, "-m", "pip", "install", "--target", "/workspace/lib",
     "--index-url", "https://{INDEX_HOST}/simple", "--cert", "/workspace/index-ca.pem",
     "--no-cache-dir", "--disable-pip-version-check", "--no-input", "sandcrew-probe"],
    capture_output=True, text=True,
)
print("pip exit", installed.returncode)
if installed.returncode:
    print(installed.stdout[-3000:], installed.stderr[-3000:])
sys.path.insert(0, "/workspace/lib")
import sandcrew_probe
print(sandcrew_probe.GREETING)
"""


async def test_pip_installs_a_pure_python_package_from_an_allowed_index(
    docker_client: docker.DockerClient,
) -> None:
    authority = CertificateAuthority("sandcrew test index authority")
    with package_index(authority, probe_wheel()) as index:
        network = LoopbackNetwork(
            hosts={INDEX_HOST: INDEX_PUBLIC},
            routes={(INDEX_PUBLIC, 443): index.port},
        )
        config = SandboxConfig(timeout=120.0, egress={"allow": [INDEX_HOST]})
        async with DockerSandbox(
            config, docker_client=docker_client, egress_network=network
        ) as sandbox:
            result = await sandbox.run(INSTALL, files={"index-ca.pem": authority.certificate_pem})

    assert result.exit_code == 0, result.stdout + result.stderr
    assert "pip exit 0" in result.stdout, result.stdout + result.stderr
    assert result.stdout.strip().endswith(GREETING)
    # pip read the project's page, then fetched the wheel, both through the proxy.
    assert index.paths[0].rstrip("/") == "/simple/sandcrew-probe"
    assert f"/files/{WHEEL_NAME}" in index.paths
    assert result.network is not None
    allowed = [event for event in result.network.events if event.decision == "allowed"]
    assert allowed
    assert {event.host for event in allowed} == {INDEX_HOST}
    assert all(event.decision == "allowed" for event in result.network.events)
