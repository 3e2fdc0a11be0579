"""`sandcrew doctor`: is this machine ready, and does the engine enforce the sandbox?"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

import sandcrew
from sandcrew.cli._docker import connect_docker
from sandcrew.errors import SandcrewError
from sandcrew.sandbox import (
    DockerSandbox,
    SandboxConfig,
    describe_seccomp_profile,
    docker_endpoint,
    list_images,
)

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


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(
        self_test: Annotated[
            bool, typer.Option(help="Run the security self-test in a real container.")
        ] = True,
        base_url: Annotated[
            str | None, typer.Option(help="Model endpoint to check (default: from settings).")
        ] = None,
        model: Annotated[
            str | None, typer.Option(help="Model that must be served (default: from settings).")
        ] = None,
    ) -> None:
        """Check Python, the model endpoint, Docker, runtimes, images and the sandbox's
        security in a real container."""
        console = Console()
        checks = [
            Check("python", True, f"{platform.python_version()}, sandcrew {sandcrew.__version__}"),
            _model_endpoint(base_url, model),
        ]
        try:
            client = connect_docker()
        except SandcrewError as error:
            checks.append(Check("docker engine", False, str(error)))
            _show(console, checks)
            raise typer.Exit(1) from None
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
        for image in list_images(client):
            if image.present:
                checks.append(Check(f"image {image.name}", True, image.tag))
            elif image.optional:
                detail = f"{image.tag} not built (optional): {image.build_command}"
                checks.append(Check(f"image {image.name}", True, detail, warning=True))
            else:
                detail = f"{image.tag} missing: {image.build_command}"
                checks.append(Check(f"image {image.name}", False, detail))
        if self_test and all(check.ok for check in checks):
            checks.extend(_self_test())
        _show(console, checks)
        if not all(check.ok for check in checks):
            raise typer.Exit(1)


def _model_endpoint(base_url: str | None, model: str | None) -> Check:
    """Ask the configured endpoint for its models; no model configured is only a warning."""
    import openai

    from sandcrew.settings import load_crew_settings

    settings = load_crew_settings({"base_url": base_url, "model": model})
    if settings.api_key is None and not settings.base_url:
        return Check(
            "model endpoint",
            True,
            "not configured: set OPENAI_API_KEY, or pass --base-url for a local server",
            warning=True,
        )
    client = openai.OpenAI(
        base_url=settings.base_url, api_key=settings.api_key_value(), max_retries=0, timeout=10
    )
    where = str(client.base_url)
    try:
        models = [model.id for model in client.models.list()]
    except openai.OpenAIError as error:
        return Check("model endpoint", False, f"{where}: {type(error).__name__}: {error}")
    finally:
        client.close()
    shown = ", ".join(models[:5]) + (" …" if len(models) > 5 else "")
    detail = f"{where} serves {len(models)} model(s): {shown}"
    if settings.model not in models:
        # Some servers list no models or aliases only; solving may still work.
        return Check(
            "model endpoint",
            True,
            f"{detail}; {settings.model} is not among them (choose one with --model)",
            warning=True,
        )
    return Check("model endpoint", True, detail)


def _self_test() -> list[Check]:
    config = SandboxConfig(timeout=20)
    profile = Check("seccomp profile", True, describe_seccomp_profile(config.seccomp_profile))
    result = DockerSandbox(config).run_sync(SELF_TEST_PROGRAM, "python")
    if not result.ok:
        return [profile, Check("security self-test", False, result.to_runner_message())]
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        return [
            profile,
            Check("security self-test", False, f"unreadable report: {result.stdout!r}"),
        ]
    return [profile, *security_checks(report)]


def _show(console: Console, checks: list[Check]) -> None:
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
