"""Clients that open a connection to one of sandcrew's HTTP servers and never finish a request."""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlsplit


def open_connection(url: str) -> socket.socket:
    """A TCP connection to the server of ``url`` that sends nothing."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=30)


def trickle(connection: socket.socket, *, every: float = 0.5) -> threading.Thread:
    """Send a request head one byte at a time, never its end, until the server hangs up."""
    head = b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 10_000

    def send() -> None:
        for byte in head:
            try:
                connection.send(bytes([byte]))
            except OSError:
                return
            time.sleep(every)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


def closed_by_the_server(connection: socket.socket, *, within: float) -> bool:
    """Whether the server closed ``connection`` within ``within`` seconds, answering nothing."""
    connection.settimeout(within)
    try:
        return connection.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
