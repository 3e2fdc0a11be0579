"""Servers the network-by-policy tests start on loopback: upstreams (HTTP or HTTPS with a
throwaway authority) that record what reached them, and tripwires that count connections.

Every host name a test uses maps to one of these through
:class:`sandcrew.testing.LoopbackNetwork` (or is ``localhost``): nothing leaves the machine.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from sandcrew.sandbox._egress_tls import CertificateAuthority, load_chain_from_memory

_STATUSES_OF = """
import json, urllib.request, urllib.error
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=15) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError as error:
        return type(error).__name__
print(json.dumps([fetch(url) for url in {urls!r}]))
"""


def statuses_of(urls: list[str]) -> str:
    """A program that prints, as a JSON list, the HTTP status each of ``urls`` answers (or
    the name of the error that stopped it), through the proxy its environment names."""
    return _STATUSES_OF.format(urls=urls)


@dataclass
class Seen:
    """One request an upstream received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Upstream:
    name: str
    port: int
    requests: list[Seen] = field(default_factory=list)

    def header_values(self, name: str) -> list[str]:
        return [
            value
            for seen in self.requests
            for key, value in seen.headers.items()
            if key.lower() == name.lower()
        ]


def _handler(upstream: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            # Headers and body are two writes: without this, the body waits for the
            # client's delayed acknowledgement of the headers.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            seen = Seen(self.command, self.path, dict(self.headers.items()), body)
            upstream.requests.append(seen)
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            status, extra, payload = 200, [], f"hello from {upstream.name}\n".encode()
            if url.path == "/headers":
                payload = json.dumps(seen.headers).encode()
            elif url.path == "/redirect":
                status, extra = 302, [("Location", query["to"][0])]
                payload = b"moved\n"
            elif url.path == "/echo":
                # Echoes the Authorization header in the body and in a header.
                value = self.headers.get("authorization", "")
                extra = [("X-Echo", value)]
                payload = f"you sent: {value}\n".encode()
            self.send_response(status)
            for name, value in extra:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_POST = do_HEAD = do_PUT = _answer

    return Handler


@contextmanager
def upstream_server(
    name: str,
    *,
    authority: CertificateAuthority | None = None,
) -> Iterator[Upstream]:
    """An HTTP server on 127.0.0.1 (HTTPS with a certificate for ``name`` from ``authority``)."""
    upstream = Upstream(name=name, port=0)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream))
    server.daemon_threads = True
    if authority is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        load_chain_from_memory(context, authority.leaf_pem(name))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    upstream.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield upstream
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Tripwire:
    """A listener that must see no connection."""

    port: int
    connections: int = 0


@contextmanager
def tripwire() -> Iterator[Tripwire]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    wire = Tripwire(port=listener.getsockname()[1])
    stop = threading.Event()

    def watch() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            wire.connections += 1
            connection.close()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield wire
    finally:
        stop.set()
        thread.join()
        listener.close()
