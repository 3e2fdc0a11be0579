"""The relay inside a network-by-policy container: ``127.0.0.1:3128`` to the host proxy's socket.

The container has no network interface but ``lo``; the host proxy's unix socket is
bind-mounted read-only into it. Programs find the relay through ``HTTP_PROXY`` and
``HTTPS_PROXY``; it copies bytes both ways and decides nothing (the host proxy does).
The supervisor binds the listening socket as root before the program exists, then
forks the relay, which drops to the run's uid and serves until the container ends.
When the proxy is gone, each connection is closed at once: the run fails closed.
"""

import os
import selectors
import socket

from .privileges import drop_to, make_undumpable

RELAY_PORT = 3128
MAX_CONNECTIONS = 64
_BUFFER_LIMIT = 256 * 1024  # bytes held per direction before reading pauses
_CHUNK = 65536
_MAX_FD = 65536


class _Direction:
    """Bytes read from ``source`` waiting to be written to ``target``."""

    __slots__ = ("buffer", "ended", "source", "target")

    def __init__(self, source: socket.socket, target: socket.socket) -> None:
        self.source, self.target = source, target
        self.buffer = bytearray()
        self.ended = False  # the source said end of stream


class _Pair:
    __slots__ = ("directions", "sockets")

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.sockets = (client, upstream)
        self.directions = (_Direction(client, upstream), _Direction(upstream, client))

    def wanted(self, sock: socket.socket) -> int:
        events = 0
        for direction in self.directions:
            reading = direction.source is sock and not direction.ended
            if reading and len(direction.buffer) < _BUFFER_LIMIT:
                events |= selectors.EVENT_READ
            if direction.target is sock and direction.buffer:
                events |= selectors.EVENT_WRITE
        return events

    def finished(self) -> bool:
        return all(direction.ended and not direction.buffer for direction in self.directions)


class Relay:
    """Accepts on ``listener``; each connection gets one to ``socket_path``."""

    def __init__(self, listener: socket.socket, socket_path: str) -> None:
        self.listener = listener
        self.socket_path = socket_path
        self.selector = selectors.DefaultSelector()
        self.pairs: dict[socket.socket, _Pair] = {}
        self.waiting: set[socket.socket] = set()

    def serve(self) -> None:
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ)
        while True:
            for key, events in self.selector.select():
                sock = key.fileobj
                if sock is self.listener:
                    self.accept()
                    continue
                assert isinstance(sock, socket.socket)
                pair = self.pairs.get(sock)
                if pair is not None:
                    self.move(pair, sock, events)

    def accept(self) -> None:
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        if len(self.pairs) >= 2 * MAX_CONNECTIONS:  # two sockets a connection
            client.close()
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.settimeout(5.0)
            upstream.connect(self.socket_path)
        except OSError:
            # The host proxy is gone: nothing to reach, the program sees a closed connection.
            upstream.close()
            client.close()
            return
        # Small writes go out at once: a TLS handshake's records would otherwise wait for
        # the peer's delayed acknowledgement (tens of milliseconds each).
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair = _Pair(client, upstream)
        for sock in pair.sockets:
            sock.setblocking(False)
            self.pairs[sock] = pair
        self.update(pair)

    def move(self, pair: _Pair, sock: socket.socket, events: int) -> None:
        try:
            for direction in pair.directions:
                if direction.source is sock and events & selectors.EVENT_READ:
                    chunk = sock.recv(_CHUNK)
                    if chunk:
                        direction.buffer += chunk
                    else:
                        direction.ended = True
                if direction.target is sock and events & selectors.EVENT_WRITE:
                    sent = sock.send(direction.buffer)
                    del direction.buffer[:sent]
                if direction.ended and not direction.buffer:
                    try:
                        direction.target.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
        except BlockingIOError:
            pass
        except OSError:
            self.close(pair)
            return
        if pair.finished():
            self.close(pair)
            return
        self.update(pair)

    def update(self, pair: _Pair) -> None:
        """Wait on each socket for what its directions need now (nothing: not waited on,
        so a half-closed socket does not wake the loop for ever)."""
        for sock in pair.sockets:
            wanted = pair.wanted(sock)
            registered = sock in self.waiting
            if wanted and registered:
                self.selector.modify(sock, wanted)
            elif wanted:
                self.selector.register(sock, wanted)
                self.waiting.add(sock)
            elif registered:
                self.selector.unregister(sock)
                self.waiting.discard(sock)

    def close(self, pair: _Pair) -> None:
        for sock in pair.sockets:
            self.pairs.pop(sock, None)
            if sock in self.waiting:
                self.waiting.discard(sock)
                self.selector.unregister(sock)
            sock.close()


def relay_listener() -> socket.socket:
    """``127.0.0.1:3128``, bound as root before the program exists."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", RELAY_PORT))
    listener.listen(MAX_CONNECTIONS)
    return listener


def fork_relay(listener: socket.socket, socket_path: str, uid: int, gid: int) -> int:
    """Fork the relay on ``listener``: the run's uid, not dumpable, nothing else of its parent's
    open (a session's supervisor starts it again after each restart)."""
    child = os.fork()
    if child == 0:
        try:
            keep = listener.fileno()
            null = os.open("/dev/null", os.O_RDWR)
            for target in (0, 1, 2):
                os.dup2(null, target)
            os.closerange(3, keep)
            os.closerange(keep + 1, _MAX_FD)
            drop_to(uid, gid)
            make_undumpable()
            Relay(listener, socket_path).serve()
        finally:
            os._exit(0)
    return child


def start_relay(socket_path: str, uid: int, gid: int) -> int:
    """Bind ``127.0.0.1:3128`` (as root, before the program exists) and fork the relay."""
    listener = relay_listener()
    child = fork_relay(listener, socket_path, uid, gid)
    listener.close()
    return child
