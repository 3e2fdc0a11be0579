"""A network for the egress proxy in tests: names and routes that all end on loopback.

The proxy asks it to resolve names and where to connect for an address it is about to
dial. Names resolve to the addresses the test chose (public-looking documentation
addresses, the metadata address, ...), so the proxy's range checks see them as they would
in the world; an address is connected to the loopback server the test routed it to, and
anything else is refused. Nothing leaves the machine, and the lookups and the addresses
dialled are recorded for the test to check.
"""

from __future__ import annotations

import ipaddress
import ssl
import threading
from collections.abc import Mapping

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class LoopbackNetwork:
    """``hosts`` maps names to addresses; ``routes`` maps ``(address, port)`` to a loopback port.

    ``trusted_pem`` (PEM roots) verifies the upstreams of intercepted hosts instead of
    the machine's roots: the test's own authority.
    """

    def __init__(
        self,
        hosts: Mapping[str, str],
        routes: Mapping[tuple[str, int], int],
        *,
        trusted_pem: bytes | None = None,
    ) -> None:
        self._hosts = {name: ipaddress.ip_address(address) for name, address in hosts.items()}
        self._routes = {
            (ipaddress.ip_address(address), port): target
            for (address, port), target in routes.items()
        }
        self._trusted_pem = trusted_pem
        self._lock = threading.Lock()
        self.lookups: list[str] = []
        """Every name the proxy asked to resolve, in order."""
        self.dials: list[tuple[str, int]] = []
        """Every ``(address, port)`` the proxy dialled, in order."""

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        with self._lock:
            self.lookups.append(host)
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            pass
        if host not in self._hosts:
            raise OSError(f"{host} is not a host of the test network")
        return [self._hosts[host]]

    def endpoint(self, address: IPAddress, port: int) -> tuple[str, int]:
        with self._lock:
            self.dials.append((str(address), port))
        target = self._routes.get((address, port))
        if target is None:
            raise ConnectionRefusedError(f"no route to {address} port {port} in the test network")
        return "127.0.0.1", target

    def upstream_tls(self) -> ssl.SSLContext:
        if self._trusted_pem is None:
            return ssl.create_default_context()
        return ssl.create_default_context(cadata=self._trusted_pem.decode("ascii"))
