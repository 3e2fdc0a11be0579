"""`sandcrew doctor`: is this machine ready, and does the engine enforce the sandbox?"""

from __future__ import annotations

import asyncio
import json
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

import sandcrew
from sandcrew.cli import _options as options, _output
from sandcrew.cli._exit_codes import ExitCode
from sandcrew.crew import CrewSettings
from sandcrew.errors import ImageNotFoundError, SandcrewError
from sandcrew.sandbox import DockerSandbox, EgressPolicy, SandboxConfig, SandboxError
from sandcrew.sandbox.host import (
    connect_docker,
    describe_seccomp_profile,
    describe_uid_leases,
    docker_endpoint,
)
from sandcrew.sandbox.images import DEFAULT_IMAGES, list_images
from sandcrew.settings import DEFAULT, describe_settings, load_settings

if TYPE_CHECKING:
    from sandcrew.agents import OpenAIChatAgent

# Runs inside a sandbox container and reports what the kernel really enforces.
SELF_TEST_PROGRAM = r"""
import ctypes, errno, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)

def refused(call):
    result = call()
    return "allowed" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")

# io_uring_setup(8, params) is system call 425 on x86-64 and AArch64 alike.
io_uring = refused(lambda: libc.syscall(425, 8, ctypes.create_string_buffer(120)))
# PTRACE_TRACEME in a child that exits at once: it succeeds unless seccomp refuses ptrace.
child = os.fork()
if child == 0:
    os._exit(0 if libc.ptrace(0, 0, 0, 0) == 0 else ctypes.get_errno())
code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
ptrace = "allowed" if code == 0 else errno.errorcode.get(code, "?")
status = {}
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    status[key] = value.strip()
try:
    with open("/sandcrew-doctor-probe", "w"):
        pass
    root_read_only = False
except OSError:
    root_read_only = True
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1).close()
    network_blocked = False
except OSError:
    network_blocked = True
print(json.dumps({
    "uid": os.getuid(),
    "cap_eff": status.get("CapEff"),
    "no_new_privs": status.get("NoNewPrivs"),
    "seccomp": status.get("Seccomp"),
    "root_read_only": root_read_only,
    "network_blocked": network_blocked,
    "interfaces": sorted(os.listdir("/sys/class/net")),
    "io_uring": io_uring,
    "ptrace": ptrace,
}))
"""


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    name: str
    ok: bool
    detail: str
    warning: bool = False
    """Worth knowing, but not a failure (e.g. no model configured yet)."""


def security_checks(report: dict[str, Any]) -> list[Check]:
    """Judge the self-test's report; every check must hold for the sandbox to be safe."""
    return [
        Check("non-root user", report.get("uid") not in (0, None), f"uid {report.get('uid')}"),
        Check(
            "no capabilities",
            int(str(report.get("cap_eff") or "1"), 16) == 0,
            f"CapEff {report.get('cap_eff')}",
        ),
        Check(
            "no new privileges",
            report.get("no_new_privs") == "1",
            f"NoNewPrivs {report.get('no_new_privs')}",
        ),
        Check("seccomp filter", report.get("seccomp") == "2", f"Seccomp {report.get('seccomp')}"),
        Check("read-only root", report.get("root_read_only") is True, "write to / refused"),
        Check(
            "network off",
            report.get("network_blocked") is True and report.get("interfaces") == ["lo"],
            f"interfaces {report.get('interfaces')}",
        ),
        Check(
            "io_uring refused",
            report.get("io_uring") in ("EPERM", "ENOSYS"),
            f"io_uring_setup: {report.get('io_uring')}",
        ),
        Check(
            "ptrace refused",
            report.get("ptrace") == "EPERM",
            f"ptrace(PTRACE_TRACEME): {report.get('ptrace')}",
        ),
    ]


def doctor(
    self_test: Annotated[
        bool, typer.Option(help="Run the security self-test in a real container.")
    ] = True,
    base_url: options.BaseUrl = None,
    model: options.Model = None,
    config: options.Config = None,
    as_json: options.Json = False,
) -> None:
    """Check Python, the settings, the model endpoint, Docker, runtimes, images and the
    sandbox's security in a real container."""
    console = _output.console()
    flags = options.flags_from_options(model=model, base_url=base_url)
    settings = load_settings(flags, config_path=config)
    checks = [
        Check("python", True, f"{platform.python_version()}, sandcrew {sandcrew.__version__}"),
        *_settings_checks(settings, flags, config),
        _model_endpoint(settings),
    ]
    if checks[-1].ok and not checks[-1].warning:
        checks.append(chat_form_check(settings))
        checks.append(tool_calling_check(settings))
    try:
        client = connect_docker()
    except SandcrewError as error:
        checks.append(Check("docker engine", False, str(error)))
        _show(console, checks, as_json=as_json)
        raise typer.Exit(ExitCode.INFRASTRUCTURE) from None
    info: dict[str, Any] = client.info()
    checks.append(
        Check(
            "docker engine",
            True,
            f"{info.get('ServerVersion')} at {docker_endpoint().host}, "
            f"cgroup v{info.get('CgroupVersion', '?')}",
        )
    )
    runtimes = sorted(info.get("Runtimes", {}))
    checks.append(
        Check(
            "runtimes",
            True,
            f"{', '.join(runtimes)} (default {info.get('DefaultRuntime')})"
            + ("" if "runsc" in runtimes else "; gVisor runsc not installed"),
        )
    )
    images = list_images(client)
    for image in images:
        if image.present:
            checks.append(Check(f"image {image.name}", True, image.tag))
        elif image.optional:
            detail = f"{image.tag} not built (optional): {image.build_command}"
            checks.append(Check(f"image {image.name}", True, detail, warning=True))
        else:
            detail = f"{image.tag} missing: {image.build_command}"
            checks.append(Check(f"image {image.name}", False, detail))
    # The self-test runs where Python runs: the configured image (sandcrew's by default).
    test_image = settings.sandbox.images["python"]
    present = {image.tag for image in images if image.present}
    if test_image not in present and not _image_exists(client, test_image):
        missing = ImageNotFoundError(test_image)
        if test_image not in DEFAULT_IMAGES.values():
            checks.append(Check("image for python (configured)", False, str(missing)))
        if self_test:
            detail = f"not run: it runs in {test_image}, which is missing"
            checks.append(Check("security self-test", True, detail, warning=True))
    elif self_test:
        checks.extend(_self_test(test_image))
    _show(console, checks, as_json=as_json)
    if not all(check.ok for check in checks):
        raise typer.Exit(ExitCode.CHECK_FAILED)


_SETTINGS_ALWAYS_SHOWN = (
    "endpoint.model",
    "endpoint.base_url",
    "endpoint.api_key",
    "endpoint.timeout",
    "endpoint.retries",
    "mode",
    "max_rounds",
    "sandbox.timeout",
    "sandbox.memory_bytes",
)


def _settings_checks(
    settings: CrewSettings, flags: dict[str, Any], config: Path | None
) -> list[Check]:
    """The main settings, and every other one not at its default, with where it came from."""
    checks = []
    for setting in describe_settings(settings, flags, config_path=config):
        if setting.name in _SETTINGS_ALWAYS_SHOWN or setting.source != DEFAULT:
            value = "not set" if setting.value is None else setting.value
            checks.append(Check(f"setting {setting.name}", True, f"{value} ({setting.source})"))
    return checks


def _model_endpoint(settings: CrewSettings) -> Check:
    """Ask the configured endpoint for its models; no model configured is only a warning."""
    import openai

    endpoint = settings.endpoint
    if not endpoint.configured:
        return Check(
            "model endpoint",
            True,
            "not configured: set OPENAI_API_KEY, or pass --base-url for a local server",
            warning=True,
        )

    async def served_models() -> tuple[str, list[str]]:
        client = endpoint.client(retries=0, timeout=10)
        try:
            return str(client.base_url), [model.id async for model in client.models.list()]
        finally:
            await client.close()

    where = endpoint.base_url or "https://api.openai.com/v1"
    try:
        where, models = asyncio.run(served_models())
    except openai.AuthenticationError as error:
        why = f"rejected the API key (HTTP {error.status_code}); check OPENAI_API_KEY"
        return Check("model endpoint", False, f"{where} {why}")
    except openai.APIConnectionError as error:
        cause = error.__cause__ or error
        return Check(
            "model endpoint",
            False,
            f"{where} could not be reached ({type(cause).__name__}: {cause}); check that the "
            "server is running and the base URL is right (--base-url or OPENAI_BASE_URL; it "
            "usually ends in /v1)",
        )
    except openai.OpenAIError as error:
        return Check("model endpoint", False, f"{where}: {type(error).__name__}: {error}")
    shown = ", ".join(models[:5]) + (" …" if len(models) > 5 else "")
    detail = f"{where} serves {len(models)} model(s): {shown}"
    if endpoint.model not in models:
        # Some servers list no models or aliases only; solving may still work.
        return Check(
            "model endpoint",
            True,
            f"{detail}; {endpoint.model} is not among them (choose one with --model)",
            warning=True,
        )
    return Check("model endpoint", True, detail)


PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "report_status",
        "description": "Report whether you are ready.",
        "parameters": {
            "type": "object",
            "properties": {"ready": {"type": "boolean"}},
            "required": ["ready"],
            "additionalProperties": False,
        },
    },
}
TOOL_ADVICE = (
    "the reviewer falls back to a plain-text review; for typed reviews use a model and "
    "server with tool calling (llama.cpp: --chat_format chatml-function-calling or a "
    "template with tools; vLLM: --enable-auto-tool-choice --tool-call-parser; Ollama: a "
    "model tagged 'tools')"
)


def tool_calling_check(settings: CrewSettings) -> Check:
    """Can the endpoint make the reviewer's call? One tiny request with a named
    ``tool_choice`` (what the reviewer sends) and one with ``"auto"``."""
    import asyncio

    from sandcrew.agents import GenerateReplyOptions, TextMessage, ToolCallMessage as CallMessage

    named = {"type": "function", "function": {"name": "report_status"}}
    question = [TextMessage(role="user", content="Call report_status with ready=true.")]

    async def probe(agent: OpenAIChatAgent, choice: Any) -> str:
        options = GenerateReplyOptions(tools=[PROBE_TOOL], tool_choice=choice)
        try:
            reply = await agent.generate_reply(question, options)
        except SandcrewError as error:
            return f"no ({type(error).__name__}: {str(error)[:160]})"
        if isinstance(reply, CallMessage) and reply.tool_calls[0].name == "report_status":
            how = f" ({'; '.join(reply.notes)})" if reply.notes else ""
            return f"yes{how}"
        return f"no (answered text: {' '.join(reply.content.split())[:80]!r})"

    async def both() -> tuple[str, str]:
        # One agent, as in the crew: what the endpoint refused once is not asked again.
        agent = probing_agent(settings, max_tokens=64)
        try:
            return await probe(agent, named), await probe(agent, "auto")
        finally:
            await agent.aclose()

    by_name, by_auto = asyncio.run(both())
    detail = f"named tool_choice: {by_name}; auto: {by_auto}"
    if by_name.startswith("yes"):
        return Check("tool calling", True, f"{detail}; the reviewer's call works")
    if by_auto.startswith("yes"):
        return Check("tool calling", True, f"{detail}; the reviewer retries with 'auto'")
    return Check("tool calling", True, f"{detail}; {TOOL_ADVICE}", warning=True)


def probing_agent(
    settings: CrewSettings, *, max_tokens: int, system_message: str | None = None
) -> OpenAIChatAgent:
    """An agent for one probe: no retries, a bounded wait, the shortest answers."""
    from sandcrew.agents import OpenAIChatAgent

    endpoint = settings.endpoint
    return OpenAIChatAgent(
        "doctor",
        endpoint=endpoint,
        client=endpoint.client(retries=0, timeout=min(endpoint.timeout, 120)),
        system_message=system_message,
        max_tokens=max_tokens,
        temperature=0,
    )


CHAT_FORM_PROBE_SYSTEM = "You are in a group chat. Answer with one word."
"""The chat-form probe's instructions (scripted servers recognise the probe by them)."""


def chat_form_check(settings: CrewSettings) -> Check:
    """Which layout of a conversation does the endpoint accept? One tiny request shaped like
    the crew's (a system message, then two user turns in a row), sent as a solve sends it."""
    from sandcrew.agents import ChatForm, TextMessage

    history = [
        TextMessage(content="I review code.", sender="reviewer"),
        TextMessage(content="Say ready.", sender="admin"),
    ]

    async def probe() -> tuple[ChatForm, str]:
        agent = probing_agent(settings, max_tokens=16, system_message=CHAT_FORM_PROBE_SYSTEM)
        try:
            reply = await agent.generate_reply(history)
            return agent.form_to_send(), "; ".join(reply.notes)
        finally:
            await agent.aclose()

    try:
        form, notes = asyncio.run(probe())
    except SandcrewError as error:
        return Check("chat form", True, f"no answer ({str(error)[:300]})", warning=True)
    setting = settings.endpoint.chat_form
    if setting != "auto":
        return Check("chat form", True, f"{form} (forced by endpoint.chat_form); accepted")
    if form is ChatForm.OPEN:
        return Check("chat form", True, "open: the endpoint accepts consecutive user turns")
    return Check(
        "chat form",
        True,
        f"{form}: {notes}; solves send this form after their first request (set "
        f"endpoint.chat_form = {str(form)!r} to send it from the first)",
    )


def _image_exists(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def _self_test(image: str) -> list[Check]:
    # The product's protections (not the settings' relaxations), in the image runs use.
    config = SandboxConfig(timeout=20, images={"python": image})
    profile = Check("seccomp profile", True, describe_seccomp_profile(config.seccomp_profile))
    shared, how = describe_uid_leases()
    leases = Check("run uid leases", True, how, warning=not shared)
    result = DockerSandbox(config).run_sync(SELF_TEST_PROGRAM, "python")
    if not result.ok:
        return [profile, leases, Check("security self-test", False, result.to_runner_message())]
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        return [
            profile,
            leases,
            Check("security self-test", False, f"unreadable report: {result.stdout!r}"),
        ]
    return [profile, leases, *security_checks(report), _egress_check()]


# Asks the proxy, through the relay, for a host the policy does not allow: the proxy
# refuses it before resolving anything, so the probe sends nothing off the machine.
EGRESS_PROBE_PROGRAM = """
import socket
try:
    relay = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    relay.sendall(b"GET http://probe.sandcrew.invalid/ HTTP/1.1\\r\\n"
                  b"Host: probe.sandcrew.invalid\\r\\nConnection: close\\r\\n\\r\\n")
    answer = b""
    while chunk := relay.recv(4096):
        answer += chunk
    print(answer.split(b"\\r\\n", 1)[0].decode("ascii", "replace"))
except OSError as error:
    print("no answer:", error)
"""


def _egress_check() -> Check:
    """Whether this engine can do network by policy (the proxy's socket mounted into a run)."""
    policy = EgressPolicy.from_text(allow=["doctor.sandcrew.invalid:1"])
    config = SandboxConfig(timeout=20, egress=policy)
    try:
        result = DockerSandbox(config).run_sync(EGRESS_PROBE_PROGRAM, "python")
    except SandboxError as error:
        return Check("network by policy", True, f"not available: {error}", warning=True)
    answer = result.stdout.strip()
    events = result.network.events if result.network is not None else ()
    if answer.startswith("HTTP/1.1 403") and [event.decision for event in events] == ["denied"]:
        return Check(
            "network by policy",
            True,
            "the proxy's socket reaches a run; a host off the list was refused unresolved",
        )
    return Check(
        "network by policy",
        True,
        "not available on this engine: a run could not reach the proxy's socket "
        f"({answer or 'no answer'}); --allow-host runs fail closed here (remote engines and "
        "Docker Desktop's virtual machine cannot mount a socket of this machine)",
        warning=True,
    )


def _show(console: Console, checks: list[Check], *, as_json: bool = False) -> None:
    if as_json:
        ok = all(check.ok for check in checks)
        _output.print_json({"ok": ok, "checks": _output.as_dicts(checks)})
        return
    table = Table("check", "", "detail")
    for check in checks:
        if not check.ok:
            status = "[red]FAIL[/]"
        elif check.warning:
            status = "[yellow]warn[/]"
        else:
            status = "[green]ok[/]"
        table.add_row(check.name, status, Text(check.detail))
    console.print(table)
