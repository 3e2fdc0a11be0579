"""Sandbox images: which image serves which language, and how to build them.

The Dockerfiles live in the top-level ``images/`` folder (installed as the
``sandcrew.images`` data package). On a machine that reaches a registry they
build from public base images. Where no registry can be reached, the base root
filesystem is made with ``debootstrap`` from the Debian mirror configured in
``/etc/apt``, imported with ``docker import``, and our Dockerfile is built on top.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import ConfigurationError, ErrorCode, InfrastructureError

if TYPE_CHECKING:
    import docker

PYTHON_IMAGE = "sandcrew/python:latest"
NODE_IMAGE = "sandcrew/node:latest"
PYTHON_DATA_IMAGE = "sandcrew/python-data:latest"
DATA_PACKAGES = ("numpy==1.26.4", "pandas==2.2.3", "matplotlib==3.9.2", "scipy==1.14.1")
"""What the python-data image adds (their dependencies come with them)."""
SESSION_PACKAGES = ("ipython==8.31.0", "pip==24.3.1")
"""What the python image adds: the interpreter of Python sessions (and its dependencies),
and pip, for ``pip install --target`` from an index a network policy allows."""
OFFLINE_SUITE = "bookworm"
OFFLINE_BASE_IMAGE = f"sandcrew/debian-base:{OFFLINE_SUITE}"
PUBLIC_BASE_IMAGE = "python:3.11-slim-bookworm"

PACKAGES_LABEL = "sandcrew.packages"
"""Image label listing the Python packages the image adds to the standard library,
``"numpy 1.26.4, pandas 2.2.3"`` (empty: none). Set when the image is built."""

DEFAULT_IMAGES: dict[str, str] = {
    "python": PYTHON_IMAGE,
    "bash": PYTHON_IMAGE,
    "javascript": NODE_IMAGE,
}
"""Language → image tag used by default."""

BUILD_COMMAND = "sandcrew images build"
LIST_COMMAND = "sandcrew images list"

Progress = Callable[[str], None]


class ImageBuildError(InfrastructureError):
    """Building a sandbox image failed; the message says which step and why."""

    code = ErrorCode.IMAGE_BUILD_FAILED


class BaseSource(enum.StrEnum):
    """Where the base layer of a sandbox image comes from."""

    AUTO = "auto"
    """The public base image if it is present or can be pulled, else debootstrap."""
    PUBLIC = "public"
    """Always the public base image (pulled from a registry when missing)."""
    DEBOOTSTRAP = "debootstrap"
    """Always a Debian root filesystem made locally with debootstrap."""


@dataclass(frozen=True)
class ImageSpec:
    """One sandbox image: its tag and the folder holding its Dockerfile."""

    name: str
    tag: str
    folder: str
    public_base: str
    debian_packages: tuple[str, ...]
    """Packages the debootstrap root filesystem must include for this image."""
    offline_base: str = OFFLINE_BASE_IMAGE
    """The tag of that debootstrap root filesystem."""
    default: bool = True
    """Built by ``sandcrew images build`` without names; others only when named."""
    builds_on: str | None = None
    """Another spec's name: its image is the base (built first when missing)."""
    wheels: tuple[str, ...] = ()
    """Python requirements whose wheels pip downloads on the host into the build context."""

    @property
    def labels(self) -> dict[str, str]:
        """Labels the build adds: the Python packages installed, as pinned here."""
        below = next((spec for spec in IMAGE_SPECS if spec.name == self.builds_on), None)
        requirements = (below.wheels if below is not None else ()) + self.wheels
        listed = ", ".join(requirement.replace("==", " ") for requirement in requirements)
        return {PACKAGES_LABEL: listed}


IMAGE_SPECS: tuple[ImageSpec, ...] = (
    ImageSpec(
        name="python",
        tag=PYTHON_IMAGE,
        folder="python",
        public_base=PUBLIC_BASE_IMAGE,
        debian_packages=("python3",),
        wheels=SESSION_PACKAGES,
    ),
    ImageSpec(
        name="node",
        tag=NODE_IMAGE,
        folder="node",
        public_base=PUBLIC_BASE_IMAGE,
        debian_packages=("python3", "nodejs"),
        offline_base=f"sandcrew/debian-node:{OFFLINE_SUITE}",
        default=False,
    ),
    ImageSpec(
        name="python-data",
        tag=PYTHON_DATA_IMAGE,
        folder="python-data",
        public_base=PUBLIC_BASE_IMAGE,
        debian_packages=("python3",),
        default=False,
        builds_on="python",
        wheels=DATA_PACKAGES,
    ),
)


def missing_image_advice(tag: str) -> str:
    """What to do about the missing image ``tag``: the command that builds one of sandcrew's,
    else where an image of someone else's comes from."""
    for spec in IMAGE_SPECS:
        if spec.tag == tag:
            named = "" if spec.default else f" {spec.name}"
            return f"build it with `{BUILD_COMMAND}{named}`"
    return (
        f"sandcrew does not build it: pull it (`docker pull {tag}`) or build it yourself, "
        f"or use one of sandcrew's images (`{LIST_COMMAND}` shows them)"
    )


@dataclass(frozen=True)
class ImageStatus:
    """What ``sandcrew images list`` shows for one image."""

    name: str
    tag: str
    present: bool
    image_id: str | None
    size_bytes: int | None
    created: str | None
    optional: bool = False
    """Not built by the plain ``sandcrew images build``; only its language needs it."""
    packages: tuple[str, ...] | None = None
    """The Python packages it adds to the standard library; ``None``: it does not say."""

    @property
    def build_command(self) -> str:
        return f"{BUILD_COMMAND} {self.name}" if self.optional else BUILD_COMMAND


def list_images(client: docker.DockerClient) -> list[ImageStatus]:
    """Report every sandbox image the product knows of, built or not."""
    import docker.errors

    statuses = []
    for spec in IMAGE_SPECS:
        try:
            image = client.images.get(spec.tag)
        except docker.errors.ImageNotFound:
            statuses.append(
                ImageStatus(spec.name, spec.tag, False, None, None, None, not spec.default)
            )
            continue
        attrs: dict[str, Any] = image.attrs
        statuses.append(
            ImageStatus(
                spec.name,
                spec.tag,
                True,
                image.short_id,
                int(attrs.get("Size", 0)),
                str(attrs.get("Created", "")),
                not spec.default,
                _packages_of(attrs),
            )
        )
    return statuses


def image_packages(client: docker.DockerClient, tag: str) -> tuple[str, ...] | None:
    """The Python packages image ``tag`` adds to the standard library, from its label.

    ``()``: none; ``None``: the image does not say (built without the label, or a
    custom image), or it cannot be inspected (missing: its runs will say so).
    """
    import docker.errors

    try:
        image = client.images.get(tag)
    except (docker.errors.DockerException, OSError):
        return None
    attrs: dict[str, Any] = image.attrs
    return _packages_of(attrs)


def _packages_of(attrs: dict[str, Any]) -> tuple[str, ...] | None:
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    listed = labels.get(PACKAGES_LABEL)
    if not isinstance(listed, str):
        return None
    return tuple(package.strip() for package in listed.split(",") if package.strip())


def build_images(
    client: docker.DockerClient,
    *,
    base: BaseSource = BaseSource.AUTO,
    rebuild_base: bool = False,
    names: tuple[str, ...] | None = None,
    tag: str | None = None,
    install_deps: bool = False,
    on_progress: Progress = lambda line: None,
    on_step: Progress = lambda line: None,
) -> list[str]:
    """Build the sandbox images (the default ones, or those in ``names``); return their tags.

    ``tag`` builds the one image in ``names`` under that tag instead of its own (a variant
    to try out or to push elsewhere; an image it builds on keeps its own tag).
    ``install_deps`` installs debootstrap with apt-get when the offline base needs it and
    it is missing (as root only). ``on_progress`` gets every line of the build;
    ``on_step`` only what the build decided, one line each: the base each image is built
    on, and why that one.
    """
    specs = [spec for spec in IMAGE_SPECS if (spec.name in names if names else spec.default)]
    unknown = set(names or ()) - {spec.name for spec in IMAGE_SPECS}
    if unknown:
        known = ", ".join(spec.name for spec in IMAGE_SPECS)
        raise ImageBuildError(f"unknown image {sorted(unknown)}; known images: {known}")
    if tag is not None:
        if names is None or len(set(names)) != 1:
            raise ConfigurationError("a tag applies to exactly one image; name one, e.g. python")
        specs = [dataclasses.replace(specs[0], tag=tag)]
    built: list[str] = []
    for spec in specs:
        if spec.builds_on is not None:
            below = next(other for other in IMAGE_SPECS if other.name == spec.builds_on)
            if below.tag not in built and not _image_exists(client, below.tag):
                built += build_images(
                    client,
                    base=base,
                    rebuild_base=rebuild_base,
                    names=(below.name,),
                    install_deps=install_deps,
                    on_progress=on_progress,
                    on_step=on_step,
                )
            base_image, why = below.tag, f"the {below.name} image"
        else:
            base_image, why = _choose_base(
                client, spec, base, rebuild_base, on_progress, install_deps=install_deps
            )
        step = f"base of {spec.tag}: {base_image} ({why})"
        on_step(step)
        on_progress(step)
        _build_dockerfile(client, spec, base_image, on_progress)
        built.append(spec.tag)
    return built


def _choose_base(
    client: docker.DockerClient,
    spec: ImageSpec,
    base: BaseSource,
    rebuild_base: bool,
    on_progress: Progress,
    *,
    install_deps: bool = False,
) -> tuple[str, str]:
    """The base image of ``spec`` and, in a few words, why that one."""
    if base is not BaseSource.DEBOOTSTRAP:
        if _image_exists(client, spec.public_base):
            return spec.public_base, "the public image, already on this engine"
        on_progress(f"pulling {spec.public_base}")
        pull_error = _try_pull(client, spec.public_base)
        if pull_error is None:
            return spec.public_base, "the public image, pulled"
        if base is BaseSource.PUBLIC:
            raise ImageBuildError(
                f"cannot pull {spec.public_base}: {pull_error}. Without a registry, use "
                f"`{BUILD_COMMAND} --base debootstrap`."
            )
        on_progress(f"no registry reachable ({pull_error}); building the base with debootstrap")
    chosen = "--base debootstrap" if base is BaseSource.DEBOOTSTRAP else "no registry reachable"
    if rebuild_base or not _image_exists(client, spec.offline_base):
        make_debian_base(
            client,
            packages=spec.debian_packages,
            tag=spec.offline_base,
            install_deps=install_deps,
            on_progress=on_progress,
        )
        return spec.offline_base, f"a Debian root filesystem made now with debootstrap; {chosen}"
    return spec.offline_base, f"the Debian root filesystem debootstrap made before; {chosen}"


def _image_exists(client: docker.DockerClient, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def _try_pull(client: docker.DockerClient, tag: str) -> str | None:
    """Pull ``tag``; return None on success, else the engine's reason."""
    import docker.errors

    repository, _, version = tag.partition(":")
    try:
        client.images.pull(repository, tag=version or "latest")
    except docker.errors.APIError as error:
        return str(error.explanation or error)
    return None


def _build_dockerfile(
    client: docker.DockerClient, spec: ImageSpec, base_image: str, on_progress: Progress
) -> None:
    import docker.errors

    on_progress(f"building {spec.tag} from {base_image}")
    with (
        resources.as_file(resources.files("sandcrew.images") / spec.folder) as folder,
        tempfile.TemporaryDirectory(prefix="sandcrew-build-") as scratch,
    ):
        # The image's folder plus the scripts every Dockerfile shares (images/*.sh).
        context = Path(scratch) / "context"
        shutil.copytree(folder, context)
        for shared in resources.files("sandcrew.images").iterdir():
            if shared.name.endswith(".sh"):
                (context / shared.name).write_bytes(shared.read_bytes())
        if spec.wheels:
            _download_wheels(spec.wheels, context / "wheels", on_progress)
        try:
            stream: Iterator[dict[str, Any]] = client.api.build(
                path=str(context),
                tag=spec.tag,
                buildargs={"BASE_IMAGE": base_image},
                labels=spec.labels,
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
            )
            for chunk in stream:
                if "error" in chunk:
                    raise ImageBuildError(f"building {spec.tag} failed: {chunk['error'].strip()}")
                line = str(chunk.get("stream", "")).strip()
                if line:
                    on_progress(line)
        except docker.errors.APIError as error:
            raise ImageBuildError(f"building {spec.tag} failed: {error}") from error
    on_progress(f"built {spec.tag}")


def _download_wheels(requirements: tuple[str, ...], folder: Path, on_progress: Progress) -> None:
    """Download the wheels (and pip's own) for the image's Python, here on the host."""
    folder.mkdir()
    (folder / "requirements.txt").write_text("\n".join(requirements) + "\n")
    platforms = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        "--abi",
        "cp311",
        *(option for platform in platforms for option in ("--platform", platform)),
        "--dest",
        str(folder),
        *requirements,
        "pip",
    ]
    on_progress(f"downloading wheels: {' '.join(requirements)}")
    _run_streaming(command, on_progress, what="pip download")


def make_debian_base(
    client: docker.DockerClient,
    *,
    packages: tuple[str, ...],
    suite: str | None = None,
    mirror: str | None = None,
    tag: str = OFFLINE_BASE_IMAGE,
    install_deps: bool = False,
    on_progress: Progress = lambda line: None,
) -> str:
    """Make a minimal Debian root filesystem with debootstrap and import it as ``tag``.

    ``install_deps`` installs a missing debootstrap with apt-get first (as root only).
    """
    root = os.geteuid() == 0
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None and install_deps and root:
        on_progress("installing debootstrap with apt-get")
        _run_streaming(["apt-get", "update"], on_progress, what="apt-get update")
        _run_streaming(
            ["apt-get", "install", "-y", "--no-install-recommends", "debootstrap"],
            on_progress,
            what="apt-get install",
        )
        debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        sudo = "" if root else "sudo "
        raise ConfigurationError(
            "debootstrap is not installed; with no registry reachable it makes the base "
            f"image, as root. Install it with `{sudo}apt-get install -y debootstrap`, or "
            f"build as root with `{BUILD_COMMAND} --install-deps`"
        )
    if not root:
        raise ConfigurationError(
            "debootstrap needs root to make the base image; run the build as root (with sudo)"
        )
    # Always bookworm, whatever the host runs: the image's Python must not depend on it.
    suite = suite or OFFLINE_SUITE
    mirror = mirror or configured_debian_mirror()
    repository, _, version = tag.partition(":")
    with tempfile.TemporaryDirectory(prefix="sandcrew-rootfs-") as workdir:
        rootfs = Path(workdir) / "rootfs"
        command = [
            debootstrap,
            "--variant=minbase",
            f"--include={','.join(packages)}",
            suite,
            str(rootfs),
            mirror,
        ]
        on_progress(f"debootstrap {suite} from {mirror}")
        _run_streaming(command, on_progress, what="debootstrap")
        _slim_rootfs(rootfs)
        archive = Path(workdir) / "rootfs.tar"
        on_progress("packing the root filesystem")
        _run_streaming(
            ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(archive), "."],
            on_progress,
            what="tar",
        )
        on_progress(f"importing it as {tag}")
        client.api.import_image_from_file(str(archive), repository=repository, tag=version)
    return tag


def _slim_rootfs(rootfs: Path) -> None:
    """Drop caches and documentation the sandbox never needs."""
    for relative in (
        "var/cache/apt/archives",
        "var/lib/apt/lists",
        "usr/share/doc",
        "usr/share/man",
    ):
        folder = rootfs / relative
        if folder.is_dir():
            for child in folder.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                elif child.name != "lock":
                    child.unlink(missing_ok=True)


def _run_streaming(command: list[str], on_progress: Progress, *, what: str) -> None:
    tail: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip()
            tail = [*tail[-19:], line]
            if line:
                on_progress(line)
    if process.returncode != 0:
        details = "\n".join(tail)
        raise ImageBuildError(f"{what} failed with exit code {process.returncode}:\n{details}")


def configured_debian_mirror(apt_dir: Path = Path("/etc/apt")) -> str:
    """The first Debian archive URL configured for apt (deb822 or one-line format)."""
    candidates: list[Path] = []
    if (apt_dir / "sources.list").is_file():
        candidates.append(apt_dir / "sources.list")
    sources_d = apt_dir / "sources.list.d"
    if sources_d.is_dir():
        # apt itself reads only these two endings.
        candidates.extend(
            sorted(p for p in sources_d.iterdir() if p.suffix in {".list", ".sources"})
        )
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        for url in _mirror_urls(text, deb822=path.suffix == ".sources"):
            if "security" not in url:
                return url
    return "http://deb.debian.org/debian"


def _mirror_urls(text: str, *, deb822: bool) -> list[str]:
    urls = []
    if deb822:
        for stanza in re.split(r"\n\s*\n", text):
            if re.search(r"^Suites:.*\b(bookworm|trixie|bullseye|sid|stable)\b", stanza, re.M) and (
                match := re.search(r"^URIs:\s*(\S+)", stanza, re.M)
            ):
                urls.append(match.group(1))
    else:
        for line in text.splitlines():
            parts = line.split()
            if not parts or parts[0] != "deb":
                continue
            url = next((part for part in parts[1:] if "://" in part), None)
            if url is not None and "debian" in url:
                urls.append(url)
    return urls
