"""`sandcrew doctor`, `images list|build` and `sandbox gc` against the real engine."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import docker
import pytest

from sandcrew.cli.doctor import security_checks
from sandcrew.sandbox._images import (
    IMAGE_SPECS,
    OFFLINE_BASE_IMAGE,
    _build_dockerfile,
    configured_debian_mirror,
    image_packages,
)
from sandcrew.sandbox._uids import LEASE_FILE_NAME
from sandcrew.sandbox.images import DEFAULT_IMAGES, BaseSource, build_images
from sandcrew.testing import ScriptedModelServer, Turn
from tests.process import run_cli

IMAGE = DEFAULT_IMAGES["python"]
NO_MODEL = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""}


@pytest.mark.docker
def test_doctor_passes_the_security_self_test() -> None:
    completed = run_cli("doctor", env=NO_MODEL)

    assert completed.returncode == 0, completed.stdout + completed.stderr
    for check in (
        "docker engine",
        "non-root user",
        "no capabilities",
        "no new privileges",
        "seccomp filter",
        "read-only root",
        "network off",
        "seccomp profile",
        "io_uring refused",
        "ptrace refused",
    ):
        assert check in completed.stdout
    assert "FAIL" not in completed.stdout
    assert "CapEff 0000000000000000" in completed.stdout
    assert "sandcrew's own allowlist" in completed.stdout
    assert "io_uring_setup: EPERM" in completed.stdout
    assert "ptrace(PTRACE_TRACEME): EPERM" in completed.stdout
    # The probe of network by policy: a run reached the proxy, which refused a host off
    # its list before resolving it.
    assert "network by policy" in completed.stdout
    assert "unresolved" in completed.stdout


@pytest.mark.docker
def test_doctor_says_whether_run_uids_are_leased_host_wide(tmp_path: Path) -> None:
    shared = run_cli("doctor", "--json", env={**NO_MODEL, "TMPDIR": str(tmp_path)})
    (tmp_path / "unusable").mkdir()
    (tmp_path / "unusable" / LEASE_FILE_NAME).symlink_to(tmp_path / "elsewhere")
    alone = run_cli("doctor", "--json", env={**NO_MODEL, "TMPDIR": str(tmp_path / "unusable")})

    def leases(completed: subprocess.CompletedProcess[str]) -> dict[str, object]:
        checks = json.loads(completed.stdout)["checks"]
        return next(check for check in checks if check["name"] == "run uid leases")

    assert shared.returncode == 0, shared.stdout + shared.stderr
    assert leases(shared) == {
        "name": "run uid leases",
        "ok": True,
        "detail": f"host-wide, through {tmp_path / LEASE_FILE_NAME}",
        "warning": False,
    }
    # A warning, not a failure: runs are still safe from each other within a process.
    assert alone.returncode == 0, alone.stdout + alone.stderr
    unusable = leases(alone)
    assert unusable["warning"] is True
    assert "within each process only: cannot open" in str(unusable["detail"])
    assert not (tmp_path / "elsewhere").exists()


SAFE_REPORT = {
    "uid": 24683,
    "cap_eff": "0000000000000000",
    "no_new_privs": "1",
    "seccomp": "2",
    "root_read_only": True,
    "network_blocked": True,
    "interfaces": ["lo"],
    "io_uring": "EPERM",
    "ptrace": "EPERM",
}


def test_doctor_passes_a_fully_protected_report() -> None:
    assert all(check.ok for check in security_checks(SAFE_REPORT))


@pytest.mark.parametrize(
    ("weakened", "failing"),
    [
        ({"uid": 0}, "non-root user"),
        ({"cap_eff": "00000000a80425fb"}, "no capabilities"),
        ({"no_new_privs": "0"}, "no new privileges"),
        ({"seccomp": "0"}, "seccomp filter"),
        ({"root_read_only": False}, "read-only root"),
        ({"network_blocked": False}, "network off"),
        ({"interfaces": ["eth0", "lo"]}, "network off"),
        ({"io_uring": "allowed"}, "io_uring refused"),
        ({"ptrace": "allowed"}, "ptrace refused"),
    ],
    ids=lambda value: str(value),
)
def test_doctor_fails_exactly_the_protection_that_is_missing(
    weakened: dict[str, object], failing: str
) -> None:
    checks = security_checks({**SAFE_REPORT, **weakened})
    assert [check.name for check in checks if not check.ok] == [failing]


@pytest.mark.docker
def test_doctor_without_docker_exits_3_and_says_why() -> None:
    completed = run_cli(
        "doctor", env={**NO_MODEL, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    )

    assert completed.returncode == 3  # infrastructure, as every command
    assert "DOCKER_HOST" in completed.stdout
    assert "FAIL" in completed.stdout


@pytest.mark.docker
def test_images_list_shows_the_built_image() -> None:
    completed = run_cli("images", "list")

    assert completed.returncode == 0, completed.stderr
    assert IMAGE.split(":")[0] in completed.stdout
    assert "built" in completed.stdout


@pytest.mark.docker
def test_images_build_reuses_the_offline_base(docker_client: docker.DockerClient) -> None:
    # The debootstrap base exists after `sandcrew images build` on this machine; building
    # again must reuse it (no second debootstrap) and produce a working image.
    docker_client.images.get(OFFLINE_BASE_IMAGE)
    lines: list[str] = []
    tags = build_images(docker_client, base=BaseSource.DEBOOTSTRAP, on_progress=lines.append)

    assert tags == [IMAGE]
    assert not any(line.startswith("debootstrap") for line in lines)
    assert any(f"building {IMAGE} from {OFFLINE_BASE_IMAGE}" in line for line in lines)
    output = docker_client.containers.run(IMAGE, ["python3", "-c", "print(1)"], remove=True)
    assert output == b"1\n"


@pytest.mark.docker
def test_a_built_image_says_which_python_packages_it_has(
    docker_client: docker.DockerClient,
) -> None:
    # The python image's build under a tag of its own (its layers come from the cache),
    # so the shared image stays as it is.
    [spec] = [spec for spec in IMAGE_SPECS if spec.name == "python"]
    tag = f"sandcrew-test/python-labelled:{uuid.uuid4().hex[:12]}"
    docker_client.images.get(OFFLINE_BASE_IMAGE)
    try:
        _build_dockerfile(
            docker_client, dataclasses.replace(spec, tag=tag), OFFLINE_BASE_IMAGE, lambda _: None
        )
        assert image_packages(docker_client, tag) == ("ipython 8.31.0", "pip 24.3.1")
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(tag)
    # An image built without the label does not say; the data image lists its pins.
    assert image_packages(docker_client, "sandcrew-test/never-built:none") is None
    [data] = [spec for spec in IMAGE_SPECS if spec.name == "python-data"]
    assert data.labels == {
        "sandcrew.packages": (
            "ipython 8.31.0, pip 24.3.1, numpy 1.26.4, pandas 2.2.3, matplotlib 3.9.2, scipy 1.14.1"
        )
    }


@pytest.mark.docker
def test_images_list_has_a_packages_column() -> None:
    completed = run_cli("images", "list", "--json")

    assert completed.returncode == 0, completed.stderr
    images = {image["name"]: image for image in json.loads(completed.stdout)["images"]}
    # What each build pinned: IPython (for sessions), and the data packages on top of it.
    assert images["python"]["packages"] == ["ipython 8.31.0", "pip 24.3.1"]
    assert images["python-data"]["packages"] == list(_expected_packages("python-data"))
    assert "pandas 2.2.3" in images["python-data"]["packages"]


def _expected_packages(name: str) -> tuple[str, ...]:
    [spec] = [spec for spec in IMAGE_SPECS if spec.name == name]
    listed = spec.labels["sandcrew.packages"]
    return tuple(listed.split(", ")) if listed else ()


@pytest.mark.docker
def test_images_build_in_a_log_shows_step_n_of_m(docker_client: docker.DockerClient) -> None:
    # Under a tag of its own, so the shared image stays as it is; Docker's layer cache makes
    # the build quick, and every step is still listed.
    tag = f"sandcrew-test/python:steps-{uuid.uuid4().hex[:12]}"
    try:
        completed = run_cli("images", "build", "python", "--tag", tag)
        assert completed.returncode == 0, completed.stderr
        steps = [
            (int(match[1]), int(match[2]))
            for line in completed.stderr.splitlines()
            if (match := re.match(r"Step (\d+)/(\d+) : ", line))
        ]
        total = steps[0][1] if steps else 0
        assert total >= 3, completed.stderr
        assert steps == [(number, total) for number in range(1, total + 1)]
        assert completed.stderr.splitlines()[-1] == f"built {tag}"
        labels = docker_client.images.get(tag).labels
        assert labels["sandcrew.image"] == "python"
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(tag)


@pytest.mark.docker
def test_images_build_says_which_base_it_chose_and_why(docker_client: docker.DockerClient) -> None:
    # The debootstrap base is there (see above); forced, the build says it used that one, and
    # no line of the log names another base.
    docker_client.images.get(OFFLINE_BASE_IMAGE)
    tag = f"sandcrew-test/python:base-{uuid.uuid4().hex[:12]}"
    try:
        completed = run_cli("images", "build", "python", "--tag", tag, "--base", "debootstrap")
        assert completed.returncode == 0, completed.stderr
        assert completed.stderr.splitlines()[0] == (
            f"base of {tag}: {OFFLINE_BASE_IMAGE} (the Debian root filesystem debootstrap made "
            "before; --base debootstrap)"
        )
        assert "python:3.11-slim-bookworm" not in completed.stderr
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(tag)


def test_images_build_tag_needs_one_image() -> None:
    completed = run_cli("images", "build", "python", "node", "--tag", "mine/sandbox:1")

    assert completed.returncode == 2
    assert completed.stderr == (
        "error: --tag needs exactly one image name, e.g. `sandcrew images build python --tag TAG`\n"
    )


def _without_debootstrap(*folders: Path) -> dict[str, str]:
    """An environment whose PATH has no debootstrap (checked, so the shared base is safe)."""
    path = os.pathsep.join([*map(str, folders), "/usr/bin", "/bin"])
    assert shutil.which("debootstrap", path=path) is None
    return {"PATH": path}


@pytest.mark.docker
def test_offline_build_without_debootstrap_says_how_to_install_it() -> None:
    # --rebuild-base asks for debootstrap at once; it is missing, so nothing is built.
    completed = run_cli(
        "images", "build", "python", "--tag", "sandcrew-test/python:never-built",
        "--base", "debootstrap", "--rebuild-base", env=_without_debootstrap(),
    )  # fmt: skip

    assert completed.returncode == 2, completed.stderr
    sudo = "" if os.geteuid() == 0 else "sudo "
    assert completed.stderr == (
        "error: debootstrap is not installed; with no registry reachable it makes the base "
        f"image, as root. Install it with `{sudo}apt-get install -y debootstrap`, or build as "
        "root with `sandcrew images build --install-deps`\n"
    )


@pytest.mark.docker
def test_install_deps_installs_debootstrap_with_apt_get_then_uses_it(tmp_path: Path) -> None:
    # Stand-ins for the system's tools: apt-get "installs" a debootstrap that fails at once,
    # so the build stops before it could replace the shared base image.
    calls = tmp_path / "apt-get.calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_debootstrap = "#!/bin/sh\necho 'stand-in debootstrap' >&2\nexit 1\n"
    apt_get = bin_dir / "apt-get"
    apt_get.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        f'if [ "$1" = install ]; then printf %s "{fake_debootstrap}" > {bin_dir}/debootstrap;'
        f" chmod +x {bin_dir}/debootstrap; fi\n"
    )
    apt_get.chmod(0o755)

    completed = run_cli(
        "images", "build", "python", "--tag", "sandcrew-test/python:never-built",
        "--base", "debootstrap", "--rebuild-base", "--install-deps",
        env=_without_debootstrap(bin_dir),
    )  # fmt: skip

    if os.geteuid() != 0:  # installing needs root: the command to run instead
        assert completed.returncode == 2, completed.stderr
        assert "`sudo apt-get install -y debootstrap`" in completed.stderr
        assert not calls.exists()
        return
    assert completed.returncode == 3, completed.stderr
    assert calls.read_text().splitlines() == [
        "update",
        "install -y --no-install-recommends debootstrap",
    ]
    assert completed.stderr.startswith("error: debootstrap failed with exit code 1")
    assert "stand-in debootstrap" in completed.stderr


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "debian.sources",
            "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
            "Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\n"
            "Suites: bookworm-security\n",
            "http://mirror.example/debian",
        ),
        (
            "sources.list",
            "# comment\ndeb [arch=amd64] http://ftp.example/debian bookworm main\n",
            "http://ftp.example/debian",
        ),
    ],
    ids=["deb822", "one-line"],
)
def test_debian_mirror_comes_from_apt(tmp_path: Path, name: str, text: str, expected: str) -> None:
    target = tmp_path / name if name == "sources.list" else tmp_path / "sources.list.d" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    assert configured_debian_mirror(tmp_path) == expected


@pytest.mark.docker
@pytest.mark.slow  # one at a time: a test worker starting sandboxes beside it reaps its orphan
def test_sandbox_gc_removes_orphans(docker_client: docker.DockerClient) -> None:
    # Every sandcrew process that starts a sandbox reaps orphans too, so the planted
    # orphan may go before gc lists it: plant it again then.
    for _ in range(5):
        orphan_id = _plant_orphan(docker_client)
        try:
            completed = run_cli("sandbox", "gc")
            assert completed.returncode == 0, completed.stderr
            with pytest.raises(docker.errors.NotFound):
                docker_client.api.inspect_container(orphan_id)
            if f"  {orphan_id[:12]}\n" in completed.stdout:
                assert completed.stdout.startswith("removed ")
                return
        finally:
            with contextlib.suppress(docker.errors.NotFound):
                docker_client.api.remove_container(orphan_id, force=True)
    pytest.fail("gc never listed the orphan it was given (another reaper took it each time)")


def _plant_orphan(client: docker.DockerClient) -> str:
    """The id of a new sandcrew container past its deadline whose owner is on another host."""
    now = int(time.time())
    created = client.api.create_container(
        IMAGE,
        ["sleep", "60"],
        labels={
            "sandcrew.product": "sandcrew",
            "sandcrew.run-id": "orphan-test",
            "sandcrew.created-at": str(now - 120),
            "sandcrew.deadline": str(now - 60),
            "sandcrew.owner-pid": "1",
            "sandcrew.owner-host": "elsewhere",
        },
    )
    return str(created["Id"])


@pytest.mark.docker
def test_doctor_checks_the_model_endpoint() -> None:
    wide = {"COLUMNS": "250"}
    probe = Turn(
        agent="doctor", tool_calls=[{"name": "report_status", "arguments": {"ready": True}}]
    )
    form_probe = Turn(agent="doctor", tools=False, content="Ready.")
    with ScriptedModelServer([form_probe, probe, probe]) as server:
        served = run_cli(
            "doctor", "--no-self-test", "--base-url", server.base_url, "--model", "scripted",
            env=wide,
        )  # fmt: skip
        unknown = run_cli("doctor", "--no-self-test", "--base-url", server.base_url, env=wide)
        paths = [request.path for request in server.requests]
        # the served model is also asked for the chat-form and the two tool-calling probes
        assert paths == ["/v1/models", *["/v1/chat/completions"] * 3, "/v1/models"]

    assert served.returncode == 0, served.stdout
    assert "serves 1 model(s): scripted" in served.stdout
    assert "warn" not in served.stdout
    assert unknown.returncode == 0, unknown.stdout
    assert "gpt-4o-mini is not among them (choose one with --model)" in unknown.stdout
    assert "warn" in unknown.stdout


@pytest.mark.docker
def test_doctor_reports_an_unreachable_model_endpoint_with_the_fix_and_still_tests_security() -> (
    None
):
    completed = run_cli("doctor", "--base-url", "http://127.0.0.1:9/v1", "--json")

    assert completed.returncode == 1
    checks = {check["name"]: check for check in json.loads(completed.stdout)["checks"]}
    endpoint = checks["model endpoint"]
    assert endpoint["ok"] is False
    assert endpoint["detail"].startswith("http://127.0.0.1:9/v1 could not be reached (")
    assert endpoint["detail"].endswith(
        "check that the server is running and the base URL is right (--base-url or "
        "OPENAI_BASE_URL; it usually ends in /v1)"
    )
    # The sandbox needs no model: its self-test runs all the same.
    assert checks["no capabilities"] == {
        "name": "no capabilities", "ok": True, "detail": "CapEff 0000000000000000",
        "warning": False,
    }  # fmt: skip


@pytest.mark.docker
def test_doctor_says_when_the_security_self_test_cannot_run(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[sandbox.images]\npython = "sandcrew-test/missing:1"\n', encoding="utf-8")

    completed = run_cli("doctor", "--config", str(config), "--json", env=NO_MODEL)

    assert completed.returncode == 1
    checks = {check["name"]: check for check in json.loads(completed.stdout)["checks"]}
    assert checks["image for python (configured)"]["ok"] is False
    assert checks["security self-test"] == {
        "name": "security self-test", "ok": True, "warning": True,
        "detail": "not run: it runs in sandcrew-test/missing:1, which is missing",
    }  # fmt: skip
    assert "no capabilities" not in checks
