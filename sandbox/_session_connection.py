"""A session container's connection: launch, requests out, frames in, removal at the end.

:class:`SessionConnection` launches the container (every hardening of a run, the
session supervisor of :mod:`._inside.session` as its command), sends the nonce
and then requests on the attach connection's stdin, and reads the supervisor's
frames in a thread of its own: Docker multiplexes the attach stream (an 8-byte
header: stream kind, three zero bytes, big-endian size); stdout carries only the
supervisor's frames (:class:`~._inside.session_protocol.FrameReader`), stderr its
own diagnostics, kept as a short tail. Each frame is handed to the owner's event
loop. When the stream ends or breaks, the container is removed and the owner is
told why.

The container never outlives its owner: the supervisor ends when the attach
connection closes (a closed session, or an owner that exited in any way, even
SIGKILL: the engine closes the container's stdin), at the idle timeout or the
lifetime; the engine removes it then (``AutoRemove``), and the labels let
``sandcrew sandbox gc`` remove what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import threading
from collections.abc import Callable
from typing import Any

import docker

from ._container import Launch, LaunchedContainer, discard_container
from ._errors import SandboxError, SessionClosedError
from ._inside.session_protocol import FrameReader, ProtocolError, encode_request
from ._streams import raw_connection, shutdown_connection

_RECV_SIZE = 64 * 1024
_DOCKER_HEADER = 8
_STDERR_TAIL = 16 * 1024

FrameHandler = Callable[[str, bytes], None]
EndHandler = Callable[[str, str], None]
"""Told why the connection ended, and the supervisor's last diagnostics."""


class SessionConnection:
    """One session container's attach connection, its reader thread and its removal."""

    def __init__(self, api: docker.APIClient, launch: Launch, *, max_frame: int) -> None:
        self._api = api
        self._launch = launch
        self._max_frame = max_frame
        self.nonce = secrets.token_hex(16).encode()
        self.container: LaunchedContainer | None = None
        self._reader: threading.Thread | None = None
        self._send_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._launch.name

    async def open(
        self, loop: asyncio.AbstractEventLoop, on_frame: FrameHandler, on_end: EndHandler
    ) -> None:
        """Launch the container and start reading; a cancelled open still removes it."""
        try:
            self.container = await asyncio.shield(asyncio.to_thread(self._launch.run))
        except BaseException:
            await asyncio.shield(asyncio.to_thread(self._launch.discard))
            raise
        self._reader = threading.Thread(
            target=self._read,
            args=(loop, on_frame, on_end),
            name=f"sandcrew-session-{self.container.name}",
            daemon=True,
        )
        self.send_raw(self.nonce + b"\n")
        self._reader.start()

    def send(self, kind: str, ident: str, meta: dict[str, Any], data: bytes = b"") -> None:
        """Send one request (blocking: run it in a thread from the event loop)."""
        self.send_raw(encode_request(kind, ident, meta, data))

    def send_raw(self, data: bytes) -> None:
        container = self.container
        connection = raw_connection(container.connection) if container is not None else None
        if connection is None:
            raise SessionClosedError("The session's container connection is closed")
        with self._send_lock:
            try:
                connection.sendall(data)
            except OSError as error:
                raise SessionClosedError(f"The session's container is gone ({error})") from None

    def shut(self) -> None:
        """End the connection: the supervisor ends everything, the reader removes the container."""
        if self.container is not None:
            shutdown_connection(self.container.connection)

    def close(self) -> None:
        """Shut the connection and wait for the container's removal (blocking)."""
        self.shut()
        reader = self._reader
        if reader is not None and reader.is_alive() and reader is not threading.current_thread():
            reader.join(timeout=30)
        elif self.container is not None and reader is None:
            discard_container(self._api, self.container)

    def _read(
        self, loop: asyncio.AbstractEventLoop, on_frame: FrameHandler, on_end: EndHandler
    ) -> None:
        container = self.container
        assert container is not None
        demux = _DockerStreams()
        frames = FrameReader(self.nonce, self._max_frame)
        connection = raw_connection(container.connection)
        why = "the session's container ended"

        def post(callback: Callable[..., None], *arguments: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the owner's loop is closed: nobody waits
                loop.call_soon_threadsafe(callback, *arguments)

        try:
            while connection is not None:
                chunk = connection.recv(_RECV_SIZE)
                if not chunk:
                    break
                for kind, payload in frames.feed(demux.feed(chunk)):
                    post(on_frame, kind, payload)
        except ProtocolError as error:
            why = f"the session's container broke its framing ({error})"
        except OSError:
            pass
        finally:
            tail = demux.stderr_tail.decode("utf-8", "replace").strip()
            with contextlib.suppress(SandboxError):  # else gc removes it; the session is over
                discard_container(self._api, container)
            post(on_end, why, tail)


class _DockerStreams:
    """Docker's multiplexed attach stream: stdout's bytes out, stderr's last bytes kept."""

    def __init__(self) -> None:
        self.stderr_tail = bytearray()
        self._header = bytearray()
        self._left = 0
        self._stream = 0

    def feed(self, chunk: bytes) -> bytes:
        stdout = bytearray()
        view = memoryview(chunk)
        position = 0
        while position < len(view):
            if self._left == 0:
                taken = view[position : position + _DOCKER_HEADER - len(self._header)]
                self._header += taken
                position += len(taken)
                if len(self._header) == _DOCKER_HEADER:
                    self._stream = self._header[0]
                    self._left = int.from_bytes(self._header[4:8], "big")
                    self._header.clear()
                continue
            size = min(self._left, len(view) - position)
            payload = view[position : position + size]
            position += size
            self._left -= size
            if self._stream == 1:
                stdout += payload
            elif self._stream == 2:
                self.stderr_tail += payload
                del self.stderr_tail[:-_STDERR_TAIL]
        return bytes(stdout)
