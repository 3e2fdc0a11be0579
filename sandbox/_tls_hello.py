"""The server name a TLS ClientHello asks for, read from its first record (RFC 8446 §4.1.2).

The proxy reads it from a ``CONNECT`` tunnel's first bytes before it lets anything through:
a tunnel to an allowed host must start a TLS handshake for that very host. Bounded by
the record (at most 16 KiB plus its header); anything else is refused as not TLS.
"""

from __future__ import annotations

from ._egress_policy import normalize_host

RECORD_HEADER = 5
MAX_RECORD = 16384 + 256


class NotAClientHello(ValueError):
    """The bytes are not (the start of) a TLS ClientHello."""


def record_length(header: bytes) -> int:
    """Length of the handshake record that ``header`` (5 bytes) opens; raises if not TLS."""
    if len(header) < RECORD_HEADER or header[0] != 0x16 or header[1] != 0x03:
        raise NotAClientHello("the tunnel did not start with a TLS handshake")
    length = int.from_bytes(header[3:5], "big")
    if not 0 < length <= MAX_RECORD:
        raise NotAClientHello("a TLS record of an impossible size")
    return length


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise NotAClientHello("a truncated ClientHello")
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk

    def number(self, size: int) -> int:
        return int.from_bytes(self.take(size), "big")

    def block(self, length_size: int) -> bytes:
        return self.take(self.number(length_size))


def server_name(record: bytes) -> str | None:
    """The SNI host name of the ClientHello in ``record`` (header included), or ``None``."""
    body = _Reader(record[RECORD_HEADER : RECORD_HEADER + record_length(record)])
    if body.number(1) != 1:
        raise NotAClientHello("the first handshake message is not a ClientHello")
    hello = _Reader(body.block(3))
    hello.take(2 + 32)  # legacy version, random
    hello.block(1)  # session id
    hello.block(2)  # cipher suites
    hello.block(1)  # compression methods
    if hello.at == len(hello.data):
        return None  # no extensions
    extensions = _Reader(hello.block(2))
    while extensions.at < len(extensions.data):
        kind, content = extensions.number(2), extensions.block(2)
        if kind != 0:
            continue
        names = _Reader(_Reader(content).block(2))
        while names.at < len(names.data):
            name_type, name = names.number(1), names.block(2)
            if name_type == 0:
                try:
                    return normalize_host(name.decode("ascii"))
                except (UnicodeDecodeError, ValueError):
                    raise NotAClientHello("a server name that is no host name") from None
        return None
    return None
