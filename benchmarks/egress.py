"""The latency a request gains through network by policy, side by side with a direct one.

Every server is started here, on loopback; nothing leaves the machine. Each path makes
``--requests`` GETs of a small answer, each on a new connection (the worst case: a client
that keeps its connection pays the proxy's set-up once), after a few untimed ones:

- on the host: a client straight to the server, and the same client through the relay
  and the host proxy (``http://`` absolute form, a ``CONNECT`` tunnel with TLS, and an
  intercepted host with a secret header);
- in a container: a program's requests through its relay and the host proxy to a server
  on the host (``--allow-host localhost:PORT``) against the same requests to a server the
  program starts on the container's own loopback (the floor inside a container).

Prints medians, p90 and the added milliseconds. Never asserts on time.

    python benchmarks/egress.py [--requests 200]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import ssl
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table

from sandcrew.sandbox import DockerSandbox, EgressPolicy, SandboxConfig
from sandcrew.sandbox._egress_proxy import egress_proxy
from sandcrew.sandbox._egress_tls import CertificateAuthority
from sandcrew.sandbox._inside.relay import Relay
from sandcrew.testing import LoopbackNetwork
from tests.egress_servers import upstream_server

PUBLIC = "203.0.113.10"
WARM_UP = 5


def timed(call: Callable[[], None], count: int) -> list[float]:
    for _ in range(WARM_UP):
        call()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


@contextmanager
def relay_for(policy: EgressPolicy, network: LoopbackNetwork) -> Iterator[tuple[str, str]]:
    """The relay's URL in front of a channel of the proxy, and the channel's folder."""
    channel = egress_proxy().open_channel(policy, network=network)
    channel.peer_uid = os.getuid()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    threading.Thread(target=Relay(listener, channel.socket_path).serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", channel.folder
    finally:
        channel.close()


def opener(
    proxy: str | None, context: ssl.SSLContext | None = None
) -> urllib.request.OpenerDirector:
    proxies = {"http": proxy, "https": proxy} if proxy else {}
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler(proxies)]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers)


def host_paths(count: int) -> dict[str, list[float]]:
    authority = CertificateAuthority("benchmark upstream authority")
    results: dict[str, list[float]] = {}
    with (
        upstream_server("plain.test") as plain,
        upstream_server("tls.test", authority=authority) as tls,
        upstream_server("localhost", authority=authority) as local_tls,
    ):
        network = LoopbackNetwork(
            hosts={"plain.test": PUBLIC, "tls.test": PUBLIC, "secret.test": PUBLIC},
            routes={(PUBLIC, 80): plain.port, (PUBLIC, 443): tls.port},
            trusted_pem=authority.certificate_pem,
        )
        trust = ssl.create_default_context(cadata=authority.certificate_pem.decode())

        direct = opener(None)
        results["http, direct"] = timed(
            lambda: direct.open(f"http://127.0.0.1:{plain.port}/").read(), count
        )
        direct_tls = opener(None, trust)
        results["https, direct"] = timed(
            lambda: direct_tls.open(f"https://localhost:{local_tls.port}/").read(), count
        )
        with relay_for(EgressPolicy(allow=("plain.test", "tls.test")), network) as (proxy, _):
            through = opener(proxy, trust)
            results["http, through the proxy"] = timed(
                lambda: through.open("http://plain.test/").read(), count
            )
            results["https tunnel, through the proxy"] = timed(
                lambda: through.open("https://tls.test/").read(), count
            )
        os.environ["BENCH_SECRET"] = "benchmark-secret"
        policy = EgressPolicy(secret_headers=("tls.test=X-Key: {env:BENCH_SECRET}",))
        with relay_for(policy, network) as (proxy, folder):
            channel_trust = ssl.create_default_context()
            channel_trust.load_verify_locations(cadata=authority.certificate_pem.decode())
            # The run's authority, from the channel's bundle (what the program trusts).
            channel_trust.load_verify_locations(os.path.join(folder, "trust.pem"))
            intercepted = opener(proxy, channel_trust)
            results["https with a secret header, through the proxy"] = timed(
                lambda: intercepted.open("https://tls.test/").read(), count
            )
    return results


_IN_CONTAINER = r"""
import http.server, json, threading, time, urllib.request
class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
threading.Thread(target=server.serve_forever, daemon=True).start()
inside = urllib.request.build_opener(urllib.request.ProxyHandler({}))
through = urllib.request.build_opener()  # HTTP_PROXY: the relay
def timed(call, count):
    for _ in range(5):
        call()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times
print(json.dumps({
    "in a container, direct on its own loopback": timed(
        lambda: inside.open("http://127.0.0.1:%d/" % server.server_address[1]).read(), COUNT),
    "in a container, through the relay and the proxy": timed(
        lambda: through.open("http://localhost:PORT/").read(), COUNT),
}))
"""


def container_paths(count: int) -> dict[str, list[float]]:
    with upstream_server("localhost") as local:
        code = _IN_CONTAINER.replace("COUNT", str(count)).replace("PORT", str(local.port))
        config = SandboxConfig(timeout=300.0, egress={"allow": [f"localhost:{local.port}"]})
        with DockerSandbox(config) as sandbox:
            result = sandbox.run_sync(code)
    if result.exit_code != 0:
        raise SystemExit(f"the in-container benchmark failed: {result.stderr}")
    times: dict[str, list[float]] = json.loads(result.stdout)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    arguments = parser.parse_args()
    results = host_paths(arguments.requests)
    results.update(container_paths(arguments.requests))
    floors = {
        "http, through the proxy": "http, direct",
        "https tunnel, through the proxy": "https, direct",
        "https with a secret header, through the proxy": "https, direct",
        "in a container, through the relay and the proxy": (
            "in a container, direct on its own loopback"
        ),
    }
    table = Table(title=f"one GET on a new connection, {arguments.requests} requests per path")
    for column in ("path", "median ms", "p90 ms", "added vs its direct path"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for name, times in results.items():
        median = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1]
        floor = floors.get(name)
        added = (
            f"+{median - statistics.median(results[floor]):.2f} ms "
            f"({median / statistics.median(results[floor]):.1f}×)"
            if floor
            else "—"
        )
        table.add_row(name, f"{median:.2f}", f"{p90:.2f}", added)
    Console().print(table)


if __name__ == "__main__":
    main()
