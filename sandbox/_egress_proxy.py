"""The host proxy of network-by-policy runs: one per process, one unix socket per run.

A run's container has no network interface; its relay (:mod:`._inside.relay`) brings
each connection of the program to the run's socket here. For each request the proxy

- parses the head with h11 (bounded), then decides from the policy alone: a denied
  name is never resolved, never dialled;
- resolves an allowed name and refuses every address in a private or reserved range
  unless the entry names that address or ``localhost`` (:func:`refused_address`);
  the address it checked is the one it dials;
- for ``CONNECT``, answers, then reads the program's TLS ClientHello: a tunnel must be
  TLS for the host it named (raw TCP and another server name are refused);
- for a host with a secret header, terminates TLS with a certificate of the run's own
  authority, opens a verified TLS connection to the host, and adds the header
  (replacing the program's) to each request whose ``Host`` is that host; the secret is
  masked wherever it comes back in a response;
- for an absolute-form ``http://`` request, sends it on (the secret only to an
  ``http://`` secret's own host);
- follows no redirect, bounds connections, head sizes and idle time, and records every
  request as a :class:`NetworkEvent`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ipaddress
import os
import shutil
import socket
import ssl
import struct
import tempfile
import threading
import time
import weakref
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import TYPE_CHECKING, Protocol

import h11

from ._container import EgressMount
from ._egress_policy import (
    Decision,
    EgressPolicy,
    IPAddress,
    SecretHeader,
    is_address,
    normalize_host,
    refused_address,
)
from ._network_log import NetworkEvent, NetworkLog
from ._tls_hello import RECORD_HEADER, NotAClientHello, record_length, server_name

if TYPE_CHECKING:
    from ._egress_tls import CertificateAuthority

CONTAINER_FOLDER = "/run/sandcrew-egress"
"""Where a run's folder (socket, trust bundle) is mounted, read-only, in its container."""
SOCKET_NAME = "proxy.sock"
TRUST_BUNDLE_NAME = "trust.pem"
RELAY_ADDRESS = "http://127.0.0.1:3128"

HEAD_LIMIT = 16 * 1024
"""h11's bound on an incomplete head; reading at most this much at a time keeps every
request or response head (its first line and headers) under twice this size."""
CONNECT_SECONDS = 10.0
_CHUNK = 65536
_DRAIN_BYTES = 65536
_DRAIN_SECONDS = 1.0
"""What a refused connection reads of its unread request before it closes, and how long."""
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"upgrade",
        b"host",
    }
)
_MASK = b"*"
_TUNNELS_ARE_TLS = "only TLS to the named host goes through a tunnel"


class EgressNetwork(Protocol):
    """How the proxy resolves names and dials addresses; the tests give a loopback one."""

    async def resolve(self, host: str, port: int) -> list[IPAddress]: ...

    def endpoint(self, address: IPAddress, port: int) -> tuple[str, int]:
        """Where to connect for ``address`` port ``port`` (the proxy dials and adds TLS)."""
        ...

    def upstream_tls(self) -> ssl.SSLContext:
        """The context that verifies upstream certificates of intercepted hosts."""
        ...


class SystemNetwork:
    """The machine's own resolver and connections; upstreams verified against its roots."""

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        if host == "localhost":
            return [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
        with contextlib.suppress(ValueError):
            return [ipaddress.ip_address(host)]
        loop = asyncio.get_running_loop()
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses: list[IPAddress] = []
        for _family, _type, _proto, _name, sockaddr in found:
            address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
            if address not in addresses:
                addresses.append(address)
        return addresses

    def endpoint(self, address: IPAddress, port: int) -> tuple[str, int]:
        return str(address), port

    def upstream_tls(self) -> ssl.SSLContext:
        return ssl.create_default_context()


class Refused(Exception):
    """A request the proxy answers itself, with this status and reason."""

    def __init__(self, status: int, reason: str, *, decision: str = "denied") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.decision = decision


class Redactor:
    """Masks every occurrence of the secret in a stream of chunks; the length is kept."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        data = (self._held + chunk).replace(self._secret, _MASK * len(self._secret))
        keep = len(self._secret) - 1
        self._held = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep] if keep else data

    def flush(self) -> bytes:
        held, self._held = self._held, b""
        return held


@dataclass
class _Secret:
    header: SecretHeader
    value: bytes


@dataclass
class _Flow:
    """One client connection's byte counts and start, for its events."""

    started: float = field(default_factory=time.monotonic)
    sent: int = 0
    received: int = 0


class EgressChannel:
    """One run's socket: its policy, its events; the folder that is mounted into its container.

    Made by :meth:`EgressProxy.open_channel`; :meth:`close` (from any thread) ends
    every connection, removes the folder and returns what happened.
    """

    def __init__(
        self,
        proxy: EgressProxy,
        policy: EgressPolicy,
        network: EgressNetwork,
        secrets: list[_Secret],
        authority: CertificateAuthority | None,
    ) -> None:
        self._proxy = proxy
        self.policy = policy
        self._network = network
        self._secrets = secrets
        self._authority = authority
        self._private = _private_folder()
        self.folder = os.path.join(self._private, "run")
        os.mkdir(self.folder)
        # Searchable, not listable, by the run's uid; the private folder above it is 0700.
        os.chmod(self.folder, 0o711)
        self.socket_path = os.path.join(self.folder, SOCKET_NAME)
        self.peer_uid: int | None = None
        """The uid allowed to connect (the run's); ``None`` refuses everyone until set."""
        self._events: list[NetworkEvent] = []
        self._dropped = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.AbstractServer | None = None
        self._closed = False
        self._opened = time.monotonic()
        self._upstream_tls: ssl.SSLContext | None = None
        if authority is not None:
            from ._egress_tls import host_trusted_roots

            bundle = os.path.join(self.folder, TRUST_BUNDLE_NAME)
            with open(bundle, "wb") as handle:
                handle.write(host_trusted_roots().rstrip(b"\n") + b"\n" + authority.certificate_pem)
            os.chmod(bundle, 0o644)

    @property
    def container_socket(self) -> str:
        return f"{CONTAINER_FOLDER}/{SOCKET_NAME}"

    def mount(self) -> EgressMount:
        """What the run's container gets: this folder, read-only, and the variables."""
        return EgressMount(
            folder=self.folder,
            container_folder=CONTAINER_FOLDER,
            container_socket=self.container_socket,
            environment=self.environment(),
        )

    def environment(self) -> dict[str, str]:
        """Variables the run's programs get: the relay as their proxy, the trust bundle."""
        proxies = {
            name: RELAY_ADDRESS
            for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy")
        }
        # Programs talk to their own servers on the container's loopback directly, unless
        # the policy names the host's localhost (then it is reached through the proxy).
        local = any(rule.names_address for rule in self.policy.allow) or any(
            header.host == "localhost" for header in self.policy.secret_headers
        )
        no_proxy = "" if local else "localhost,127.0.0.1,::1"
        variables = {**proxies, "NO_PROXY": no_proxy, "no_proxy": no_proxy}
        if self._authority is not None:
            bundle = f"{CONTAINER_FOLDER}/{TRUST_BUNDLE_NAME}"
            for name in (
                "SSL_CERT_FILE",
                "REQUESTS_CA_BUNDLE",
                "CURL_CA_BUNDLE",
                "PIP_CERT",
                "GIT_SSL_CAINFO",
                "NODE_EXTRA_CA_CERTS",
            ):
                variables[name] = bundle
        return variables

    async def _start(self) -> None:
        self._server = await asyncio.start_unix_server(
            self._accept, path=self.socket_path, limit=HEAD_LIMIT
        )
        # Connecting to a unix socket needs write permission on it: the run's uid differs
        # from this process's. Who may use it is checked per connection (SO_PEERCRED).
        os.chmod(self.socket_path, 0o666)

    def close(self) -> NetworkLog:
        """End the connections, remove the socket and the folder; the run's events."""
        if not self._closed:
            self._closed = True
            with contextlib.suppress(RuntimeError, TimeoutError):
                self._proxy.call(self._shut_down(), timeout=10.0)
            shutil.rmtree(self._private, ignore_errors=True)
        # Recorded as each ends (a tunnel when it closes); reported as each started.
        ordered = sorted(self._events, key=lambda event: event.at)
        return NetworkLog(events=tuple(ordered), dropped=self._dropped)

    async def _shut_down(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5.0)

    def upstream_tls(self) -> ssl.SSLContext:
        """The context verifying intercepted upstreams: made once (loading roots is slow)."""
        if self._upstream_tls is None:
            self._upstream_tls = self._network.upstream_tls()
        return self._upstream_tls

    def _secret_for(self, host: str, port: int, scheme: str) -> _Secret | None:
        for secret in self._secrets:
            header = secret.header
            if (header.host, header.port, header.scheme) == (host, port, scheme):
                return secret
        return None

    def _record(self, event: NetworkEvent) -> None:
        """Keep ``event`` (its ``duration`` set: it ends now), stamped with its start."""
        if len(self._events) < self.policy.max_events:
            started = time.monotonic() - self._opened - event.duration
            self._events.append(event.model_copy(update={"at": round(max(started, 0.0), 6)}))
        else:
            self._dropped += 1

    # The connection from the relay (or the program itself, through the mounted socket).

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            if self._closed or not self._peer_allowed(writer):
                return
            if len(self._tasks) >= self.policy.max_connections:
                await _answer_plain(writer, 503, "too many connections at once through the proxy")
                await _drained(reader, writer)
                return
            self._tasks.add(task)
            await _Connection(self, reader, writer).serve()
        except (OSError, EOFError, ssl.SSLError, h11.ProtocolError, TimeoutError):
            pass
        except asyncio.CancelledError:
            # The channel is closing: the connection ends here (the stream's callback
            # would log a cancelled handler as an error).
            pass
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    def _peer_allowed(self, writer: asyncio.StreamWriter) -> bool:
        sock = writer.get_extra_info("socket")
        if sock is None or self.peer_uid is None:
            return False
        credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", credentials)
        return bool(uid == self.peer_uid)


class _Connection:
    """One connection from the run: one ``CONNECT`` tunnel, or absolute-form requests."""

    def __init__(
        self, channel: EgressChannel, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.channel = channel
        self.policy = channel.policy
        self.reader = reader
        self.writer = writer
        self.idle = channel.policy.idle_seconds

    async def read(self, reader: asyncio.StreamReader, size: int = _CHUNK) -> bytes:
        return await asyncio.wait_for(reader.read(size), self.idle)

    async def next_event(
        self, connection: h11.Connection, reader: asyncio.StreamReader
    ) -> h11.Event | type[h11.PAUSED]:
        while True:
            event = connection.next_event()
            if event is not h11.NEED_DATA:
                return event  # type: ignore[return-value]
            connection.receive_data(await self.read(reader, HEAD_LIMIT))

    async def serve(self) -> None:
        client = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
        started = time.monotonic()
        try:
            event = await self.next_event(client, self.reader)
        except h11.RemoteProtocolError as error:
            # An oversized or malformed head: refused with the reason, like any request.
            reason = f"an unreadable request ({error})"
            status = error.error_status_hint
            self.channel._record(
                NetworkEvent(
                    host="",
                    port=0,
                    method="?",
                    decision="denied",
                    reason=reason,
                    status=status,
                    duration=time.monotonic() - started,
                )
            )
            await _answer_plain(self.writer, status, reason)
            return
        if not isinstance(event, h11.Request):
            return
        method = event.method.decode("ascii", "replace")
        try:
            if event.method == b"CONNECT":
                host, port = _authority(event.target.decode("ascii", "replace"), None)
                await self.tunnel(client, host, port, started)
            elif event.target.lower().startswith(b"http://"):
                await self.forward(client, event, started)
            else:
                target = event.target[:200].decode("ascii", "replace")
                raise Refused(
                    400,
                    f"{method} {target}: the proxy takes CONNECT and absolute http:// requests",
                )
        except Refused as refusal:
            host, port = _best_effort_target(event)
            self.channel._record(
                NetworkEvent(
                    host=host,
                    port=port,
                    method=method,
                    decision="denied" if refusal.decision == "denied" else "allowed",
                    reason=refusal.reason,
                    status=refusal.status,
                    duration=time.monotonic() - started,
                )
            )
            if client.our_state in (h11.SEND_RESPONSE, h11.IDLE):
                await _answer(client, self.writer, refusal.status, refusal.reason)

    async def decide_and_resolve(self, host: str, port: int) -> tuple[Decision, IPAddress]:
        """The policy's decision (before any lookup), then the address to dial."""
        decision = self.policy.decide(host, port)
        if not decision.allowed:
            raise Refused(403, decision.reason)
        try:
            addresses = await asyncio.wait_for(
                self.channel._network.resolve(host, port), CONNECT_SECONDS
            )
        except (OSError, TimeoutError) as error:
            raise Refused(
                502, f"{host} could not be resolved ({error})", decision="allowed"
            ) from None
        names_address = decision.rule is not None and decision.rule.names_address
        problems = []
        for address in addresses:
            problem = None if names_address else refused_address(address)
            if names_address and decision.rule is not None and decision.rule.host == "localhost":
                problem = None if address.is_loopback else f"{address} is not loopback"
            if problem is None:
                return decision, address
            problems.append(problem)
        raise Refused(403, f"{host} resolves to {'; '.join(problems) or 'no address'}")

    async def dial(
        self,
        address: IPAddress,
        port: int,
        *,
        tls: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            host, route_port = self.channel._network.endpoint(address, port)
            return await asyncio.wait_for(
                asyncio.open_connection(
                    host, route_port, ssl=tls, server_hostname=server_hostname if tls else None
                ),
                CONNECT_SECONDS,
            )
        except ssl.SSLCertVerificationError as error:
            raise Refused(
                502, f"the upstream's certificate failed verification: {error.verify_message}"
            ) from None
        except (OSError, TimeoutError) as error:
            raise Refused(
                502,
                f"cannot connect to {address} port {port} ({error or 'timed out'})",
                decision="allowed",
            ) from None

    # CONNECT

    async def tunnel(self, client: h11.Connection, host: str, port: int, started: float) -> None:
        decision, address = await self.decide_and_resolve(host, port)
        secret = self.channel._secret_for(host, port, "https")
        established = h11.Response(status_code=200, headers=[], reason=b"Connection established")
        self.writer.write(client.send(established) or b"")
        await self.writer.drain()
        leftover, _ = client.trailing_data
        if secret is not None:
            if leftover:
                raise Refused(400, "data before the TLS handshake of an intercepted tunnel")
            await self.intercept(host, port, address, secret, started)
            return
        first = await self.read_client_hello(bytes(leftover))
        named = self.check_server_name(first, host)
        upstream_reader, upstream_writer = await self.dial(address, port)
        flow = _Flow(started=started)
        try:
            upstream_writer.write(first)
            flow.sent += len(first)
            await self.pump_both(self.reader, upstream_reader, upstream_writer, flow)
        finally:
            upstream_writer.close()
            self.channel._record(
                NetworkEvent(
                    host=host,
                    port=port,
                    method="CONNECT",
                    decision="allowed",
                    reason=f"{decision.reason}; TLS to {named}",
                    status=200,
                    bytes_sent=flow.sent,
                    bytes_received=flow.received,
                    duration=time.monotonic() - started,
                )
            )

    async def read_client_hello(self, start: bytes) -> bytes:
        data = start
        try:
            while len(data) < RECORD_HEADER:
                chunk = await self.read(self.reader)
                if not chunk:
                    raise NotAClientHello("the tunnel closed before a TLS handshake")
                data += chunk
            wanted = RECORD_HEADER + record_length(data)
            while len(data) < wanted:
                chunk = await self.read(self.reader)
                if not chunk:
                    raise NotAClientHello("the tunnel closed in the TLS handshake")
                data += chunk
        except NotAClientHello as error:
            raise Refused(
                403, f"{error}: only TLS to the named host goes through a tunnel"
            ) from None
        return data

    def check_server_name(self, record: bytes, host: str) -> str:
        try:
            name = server_name(record)
        except NotAClientHello as error:
            raise Refused(
                403, f"{error}: only TLS to the named host goes through a tunnel"
            ) from None
        if name is None:
            if is_address(host):
                return host
            raise Refused(403, f"the TLS handshake names no server (the tunnel is for {host})")
        if name != host:
            raise Refused(403, f"the TLS handshake is for {name}, the tunnel for {host}")
        return name

    async def pump_both(
        self,
        client_reader: asyncio.StreamReader,
        upstream_reader: asyncio.StreamReader,
        upstream_writer: asyncio.StreamWriter,
        flow: _Flow,
    ) -> None:
        last = [time.monotonic()]

        async def pump(
            source: asyncio.StreamReader, target: asyncio.StreamWriter, upward: bool
        ) -> None:
            while chunk := await source.read(_CHUNK):
                last[0] = time.monotonic()
                if upward:
                    flow.sent += len(chunk)
                else:
                    flow.received += len(chunk)
                target.write(chunk)
                await target.drain()
            if target.can_write_eof():
                with contextlib.suppress(OSError):
                    target.write_eof()

        pumps = {
            asyncio.ensure_future(pump(client_reader, upstream_writer, True)),
            asyncio.ensure_future(pump(upstream_reader, self.writer, False)),
        }
        try:
            while pumps:
                done, pumps = await asyncio.wait(pumps, timeout=1.0)
                for finished in done:
                    if finished.exception() is not None:
                        return
                if time.monotonic() - last[0] > self.idle:
                    return
        finally:
            for pending in pumps:
                pending.cancel()
            if pumps:
                await asyncio.wait(pumps)

    async def intercept(
        self, host: str, port: int, address: IPAddress, secret: _Secret, started: float
    ) -> None:
        authority = self.channel._authority
        assert authority is not None
        context = authority.server_context(host)
        offered: list[str | None] = []

        def remember_name(
            _connection: ssl.SSLObject, name: str | None, _context: ssl.SSLContext
        ) -> int | None:
            offered.append(None if name is None else name.lower().rstrip("."))
            if offered[0] != host:
                return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
            return None

        context.sni_callback = remember_name
        try:
            await asyncio.wait_for(self.writer.start_tls(context), self.idle)
        except (ssl.SSLError, OSError, TimeoutError) as error:
            reason = (
                f"the TLS handshake is for {offered[0]}, the tunnel for {host}"
                if offered and offered[0] != host
                else f"the program's TLS handshake failed ({error})"
            )
            self.channel._record(
                NetworkEvent(
                    host=host,
                    port=port,
                    method="CONNECT",
                    decision="denied",
                    reason=reason,
                    duration=time.monotonic() - started,
                )
            )
            return
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        client = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
        try:
            while True:
                event = await self.next_event(client, self.reader)
                if not isinstance(event, h11.Request):
                    return
                request_started = time.monotonic()
                method = event.method.decode("ascii", "replace")
                sent_host = _host_header(event.headers)
                if sent_host not in (host, f"{host}:{port}"):
                    reason = f"the request's Host ({sent_host}) is not {host}: no secret is sent"
                    self.channel._record(
                        NetworkEvent(
                            host=host,
                            port=port,
                            method=method,
                            decision="denied",
                            reason=reason,
                            status=421,
                            duration=time.monotonic() - request_started,
                        )
                    )
                    await _answer(client, self.writer, 421, reason)
                    return
                if upstream is None:
                    upstream = await self.dial(
                        address,
                        port,
                        tls=self.channel.upstream_tls(),
                        server_hostname=host,
                    )
                reusable, done = await self.exchange(
                    client, event, upstream, host=host, port=port, secret=secret
                )
                self.channel._record(
                    done.model_copy(update={"duration": time.monotonic() - request_started})
                )
                if not reusable:
                    upstream[1].close()
                    upstream = None
                if client.our_state is h11.MUST_CLOSE or client.their_state is h11.MUST_CLOSE:
                    return
                client.start_next_cycle()
        except Refused as refusal:
            self.channel._record(
                NetworkEvent(
                    host=host,
                    port=port,
                    method="GET",
                    decision="allowed" if refusal.decision == "allowed" else "denied",
                    reason=refusal.reason,
                    status=refusal.status,
                    duration=time.monotonic() - started,
                )
            )
            if client.our_state is h11.SEND_RESPONSE:
                await _answer(client, self.writer, refusal.status, refusal.reason)
        finally:
            if upstream is not None:
                upstream[1].close()

    # One request and its response, the secret added (or not).

    async def exchange(
        self,
        client: h11.Connection,
        request: h11.Request,
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        *,
        host: str,
        port: int,
        secret: _Secret | None,
        target: bytes | None = None,
    ) -> tuple[bool, NetworkEvent]:
        """Send ``request`` (and its body) upstream and its answer back; whether the upstream
        connection may carry another request, and the event."""
        upstream_reader, upstream_writer = upstream
        server = h11.Connection(h11.CLIENT, max_incomplete_event_size=HEAD_LIMIT)
        default_port = 443 if secret is None or secret.header.scheme == "https" else 80
        authority = host if port == default_port else f"{host}:{port}"
        if ":" in host:
            authority = f"[{host}]" if port == default_port else f"[{host}]:{port}"
        headers: list[tuple[bytes, bytes]] = [(b"host", authority.encode("ascii"))]
        injected: tuple[str, ...] = ()
        secret_name = secret.header.name.lower().encode("ascii") if secret else b""
        for name, value in request.headers:
            if name in _HOP_BY_HOP or (secret is not None and name == secret_name):
                continue
            if secret is not None and name == b"accept-encoding":
                continue
            headers.append((name, value))
        if secret is not None:
            # Compressed answers could not be searched for the secret.
            headers.append((b"accept-encoding", b"identity"))
            headers.append((secret.header.name.encode("ascii"), secret.value))
            injected = (secret.header.name,)
        upstream_writer.write(
            server.send(
                h11.Request(method=request.method, target=target or request.target, headers=headers)
            )
            or b""
        )
        sent = 0
        # The body, as the program sends it.
        while True:
            event = await self.next_event(client, self.reader)
            if isinstance(event, h11.Data):
                sent += len(event.data)
                upstream_writer.write(server.send(h11.Data(data=event.data)) or b"")
                await upstream_writer.drain()
            elif isinstance(event, h11.EndOfMessage):
                upstream_writer.write(server.send(h11.EndOfMessage()) or b"")
                await upstream_writer.drain()
                break
            else:
                raise Refused(400, "the request ended early")
        redactor = Redactor(secret.value) if secret is not None else None
        status = 502
        received = 0
        while True:
            event = await self.next_event(server, upstream_reader)
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
                if status == 101:
                    raise Refused(
                        502, "the upstream switched protocols, which the proxy does not relay"
                    )
                relayed = [
                    (name, _masked(value, secret))
                    for name, value in event.headers
                    if name not in _HOP_BY_HOP or name == b"host"
                ]
                self.writer.write(
                    client.send(
                        h11.Response(status_code=status, headers=relayed, reason=event.reason)
                    )
                    or b""
                )
            elif isinstance(event, h11.Data):
                data = redactor.feed(event.data) if redactor is not None else event.data
                received += len(event.data)
                if data:
                    self.writer.write(client.send(h11.Data(data=data)) or b"")
                    await self.writer.drain()
            elif isinstance(event, h11.EndOfMessage):
                if redactor is not None and (rest := redactor.flush()):
                    self.writer.write(client.send(h11.Data(data=rest)) or b"")
                self.writer.write(client.send(h11.EndOfMessage()) or b"")
                await self.writer.drain()
                break
            else:
                raise Refused(502, "the upstream closed before its answer was complete")
        reusable = server.our_state is h11.DONE and server.their_state is h11.DONE
        return reusable, NetworkEvent(
            host=host,
            port=port,
            method=request.method.decode("ascii", "replace"),
            decision="allowed",
            reason=f"allowed{'; ' + injected[0] + ' added' if injected else ''}",
            status=status,
            bytes_sent=sent,
            bytes_received=received,
            injected=injected,
        )

    # Absolute-form http:// requests

    async def forward(self, client: h11.Connection, request: h11.Request, started: float) -> None:
        host, port, path = _absolute_target(request.target)
        _decision, address = await self.decide_and_resolve(host, port)
        secret = self.channel._secret_for(host, port, "http")
        upstream = await self.dial(address, port)
        try:
            _, event = await self.exchange(
                client, request, upstream, host=host, port=port, secret=secret, target=path
            )
        finally:
            upstream[1].close()
        self.channel._record(event.model_copy(update={"duration": time.monotonic() - started}))


class EgressProxy:
    """The process's proxy: an event loop on a daemon thread serving every run's socket."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._channels: weakref.WeakSet[EgressChannel] = weakref.WeakSet()
        atexit.register(self.close_channels)

    def close_channels(self) -> None:
        """Close every open channel (at exit: their folders go; a run still going fails closed)."""
        for channel in list(self._channels):
            channel.close()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=run, name="sandcrew-egress", daemon=True).start()
                ready.wait()
                self._loop = loop
            return self._loop

    def call(self, coroutine: Awaitable[None], *, timeout: float) -> None:
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(coroutine), self._running_loop())
        future.result(timeout)

    def open_channel(
        self, policy: EgressPolicy, *, network: EgressNetwork | None = None
    ) -> EgressChannel:
        """A run's socket, listening; its secrets read now (a :class:`ValueError` says why not)."""
        secrets = [
            _Secret(header, header.resolve().encode("utf-8")) for header in policy.secret_headers
        ]
        authority = None
        if any(header.scheme == "https" for header in policy.secret_headers):
            from ._egress_tls import CertificateAuthority

            authority = CertificateAuthority()
        channel = EgressChannel(self, policy, network or SystemNetwork(), secrets, authority)
        self._channels.add(channel)
        try:
            self.call(channel._start(), timeout=10.0)
        except BaseException:
            channel.close()
            raise
        return channel


async def _as_coroutine(awaitable: Awaitable[None]) -> None:
    await awaitable


_shared: EgressProxy | None = None
_shared_lock = threading.Lock()


def egress_proxy() -> EgressProxy:
    """The one proxy of this process, started on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = EgressProxy()
        return _shared


# Helpers

# The longest unix socket path (sun_path, with its final NUL) on Linux.
_SOCKET_PATH_LIMIT = 107
_FOLDER_TAIL = len("/run/" + SOCKET_NAME)


def _private_folder() -> str:
    """A new 0700 folder for a run's socket, in the temporary directory or, when that path is
    too long for a unix socket, in ``/tmp``."""
    for parent in (None, "/tmp"):
        folder = tempfile.mkdtemp(prefix="sandcrew-egress-", dir=parent)
        if len(folder.encode()) + _FOLDER_TAIL <= _SOCKET_PATH_LIMIT:
            return folder
        os.rmdir(folder)
    raise OSError(
        f"the temporary directory {tempfile.gettempdir()!r} is too long a path for a unix "
        "socket, and /tmp could not be used"
    )


def _masked(value: bytes, secret: _Secret | None) -> bytes:
    if secret is None:
        return value
    return value.replace(secret.value, _MASK * len(secret.value))


def _authority(text: str, default_port: int | None) -> tuple[str, int]:
    """``host:port`` of a CONNECT target or a URL's authority, normalized."""
    from ._egress_policy import _split_port

    try:
        host_text, port = _split_port(text)
        host = normalize_host(host_text)
    except ValueError as error:
        raise Refused(400, str(error)) from None
    if port is None:
        if default_port is None:
            raise Refused(400, f"{text!r}: CONNECT needs host:port")
        port = default_port
    return host, port


def _absolute_target(target: bytes) -> tuple[str, int, bytes]:
    text = target.decode("ascii", "replace")
    rest = text[len("http://") :]
    authority, slash, path = rest.partition("/")
    authority, _, _query = authority.partition("?")
    if "@" in authority:
        raise Refused(400, "a URL with user information is refused")
    host, port = _authority(authority, 80)
    return host, port, ("/" + path if slash else "/").encode("ascii", "replace")


def _best_effort_target(request: h11.Request) -> tuple[str, int]:
    text = request.target.decode("ascii", "replace")
    try:
        if request.method == b"CONNECT":
            return _authority(text, None)
        if text.lower().startswith("http://"):
            host, port, _ = _absolute_target(request.target)
            return host, port
    except Refused:
        pass
    return text[:100], 0


def _host_header(headers: Sequence[tuple[bytes, bytes]]) -> str:
    for name, value in headers:
        if name == b"host":
            return value.decode("ascii", "replace").lower().rstrip(".")
    return ""


async def _answer(
    client: h11.Connection, writer: asyncio.StreamWriter, status: int, text: str
) -> None:
    body = (text + "\n").encode()
    writer.write(
        client.send(
            h11.Response(
                status_code=status,
                reason=HTTPStatus(status).phrase.encode("ascii"),
                headers=[
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                    (b"x-sandcrew-egress", b"refused" if status in (400, 403, 421) else b"error"),
                ],
            )
        )
        or b""
    )
    writer.write(client.send(h11.Data(data=body)) or b"")
    writer.write(client.send(h11.EndOfMessage()) or b"")
    with contextlib.suppress(OSError):
        await writer.drain()


async def _drained(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Before closing a connection whose request was not read: end the writing side, then
    read what the client sent (briefly, boundedly), so that the close does not reset the
    connection and lose the answer the client has not read yet."""
    with contextlib.suppress(OSError, RuntimeError):
        if writer.can_write_eof():
            writer.write_eof()
    with contextlib.suppress(OSError, TimeoutError, asyncio.IncompleteReadError):
        await asyncio.wait_for(reader.read(_DRAIN_BYTES), _DRAIN_SECONDS)


async def _answer_plain(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    client = h11.Connection(h11.SERVER)
    client.receive_data(b"GET / HTTP/1.1\r\nhost: proxy\r\n\r\n")
    client.next_event()
    await _answer(client, writer, status, text)
