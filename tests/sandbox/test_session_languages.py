"""Bash and JavaScript sessions keep their state on the same protocol as Python."""

from __future__ import annotations

import pytest

from sandcrew.sandbox import DockerSandbox, SessionLimits

pytestmark = pytest.mark.docker

LIMITS = SessionLimits(cell_timeout=10, interrupt_grace=3)


async def test_a_bash_session_keeps_its_directory_variables_and_functions(
    sandbox: DockerSandbox,
) -> None:
    async with sandbox.session("bash", limits=LIMITS) as session:
        setup = await session.run(
            'mkdir -p work && cd work\nGREETING=hello\ngreet() { echo "$GREETING $1"; }'
        )
        used = await session.run("pwd\ngreet world")
        failed = await session.run("ls /nowhere")
        looped = await session.run("while true; do sleep 0.1; done", timeout=1)
        after = await session.run("greet again")
        ended = await session.run("exit 3")
        fresh = await session.run('echo "${GREETING:-gone}"')

    assert setup.ok, setup
    assert used.stdout == "/workspace/work\nhello world\n"
    assert failed.error is not None
    assert (failed.error.name, failed.error.value) == ("ExitStatus", "2")
    assert "No such file" in failed.stderr
    assert looped.timed_out
    assert not looped.state_lost
    assert after.stdout == "hello again\n"
    assert ended.state_lost
    assert fresh.stdout == "gone\n"


async def test_a_javascript_session_keeps_its_context(sandbox: DockerSandbox) -> None:
    async with sandbox.session("javascript", limits=LIMITS) as session:
        setup = await session.run("let total = 40;\nfunction add(a) { return total + a; }")
        value = await session.run("add(2)")
        printed = await session.run("console.log('sum', add(1))")
        awaited = await session.run("Promise.resolve(total * 2)")
        thrown = await session.run("throw new TypeError('bad type')")
        looped = await session.run("while (true) {}", timeout=1)
        after = await session.run("total")

    assert setup.ok, setup
    assert value.outputs[0].data == {"text/plain": "42"}
    assert printed.stdout == "sum 41\n"
    assert awaited.outputs[0].data == {"text/plain": "80"}
    assert thrown.error is not None
    assert (thrown.error.name, thrown.error.value) == ("TypeError", "bad type")
    assert looped.timed_out
    assert not looped.state_lost
    assert looped.error is not None
    assert looped.error.name == "KeyboardInterrupt"
    assert after.outputs[0].data == {"text/plain": "40"}
