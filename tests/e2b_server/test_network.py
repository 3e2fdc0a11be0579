"""`sandcrew e2b --allow-host`: the server's hosts are a ceiling; a sandbox reaches the ones
its create names in E2B's `network={"allow_out": [...]}`, never more, and none without.
The hosts are servers this test starts on loopback, named `localhost` (the entry that
allows it); nothing leaves the machine."""

from __future__ import annotations

import json

import pytest
from e2b import SandboxException
from e2b.sandbox.network import ALL_TRAFFIC
from e2b_code_interpreter import Sandbox

from tests.e2b_server.helpers import e2b_server
from tests.egress_servers import statuses_of, upstream_server

pytestmark = pytest.mark.docker


def test_a_sandbox_reaches_the_hosts_it_names_among_the_servers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with upstream_server("localhost") as first, upstream_server("localhost") as second:
        one, two = f"localhost:{first.port}", f"localhost:{second.port}"
        urls = [f"http://{one}/hello", f"http://{two}/hello"]
        with e2b_server("--allow-host", one, "--allow-host", two) as server:
            server.point_sdk_here(monkeypatch)
            narrowed = Sandbox.create(network={"allow_out": [one], "deny_out": [ALL_TRAFFIC]})
            offline = Sandbox.create()
            try:
                reached = narrowed.run_code(statuses_of(urls))
                cut_off = offline.run_code(statuses_of(urls))
            finally:
                narrowed.kill()
                offline.kill()
            with pytest.raises(SandboxException, match=r"does not allow 'pypi\.org'") as widened:
                Sandbox.create(network={"allow_out": ["pypi.org"]})
            with pytest.raises(SandboxException, match=r"not implemented"):
                Sandbox.create(network={"deny_out": ["10.0.0.0/8"]})

    assert json.loads(reached.logs.stdout[0]) == [200, 403]  # the other host: the proxy's 403
    assert "200" not in "".join(cut_off.logs.stdout)
    assert len(first.requests) == 1
    assert len(second.requests) == 0
    assert f"it allows: {one}, {two}" in str(widened.value)
