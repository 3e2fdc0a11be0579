from __future__ import annotations

import pytest

from sandcrew.errors import ConfigurationError
from sandcrew.sandbox import SandboxConfig
from sandcrew.sandbox.images import DEFAULT_IMAGES

MIB = 1024 * 1024


def test_hardened_defaults() -> None:
    config = SandboxConfig()
    assert config.images == DEFAULT_IMAGES
    assert config.timeout == 10.0
    assert config.memory_bytes == 256 * MIB
    assert config.cpus == 1.0
    assert config.pids_limit == 64
    assert config.network is False
    assert config.read_only_root is True
    assert config.drop_all_capabilities is True
    assert config.no_new_privileges is True
    assert config.init is True
    assert config.workdir_tmpfs_bytes == 64 * MIB
    assert config.tmp_tmpfs_bytes == 64 * MIB
    assert config.max_output_bytes == 1 * MIB
    assert config.max_code_bytes == 1 * MIB
    assert config.file_size_limit_bytes == 16 * MIB
    assert config.open_files_limit == 256
    assert config.core_dump_limit_bytes == 0
    assert config.user is None
    assert config.uid_range == (20000, 59999)
    assert config.seccomp_profile == "sandcrew"
    assert config.runtime is None
    assert config.log_driver == "none"


def test_invalid_values_are_all_reported_at_once() -> None:
    with pytest.raises(ConfigurationError) as caught:
        SandboxConfig(timeout=-1, memory_bytes=256, pids_limit=0)
    message = str(caught.value)
    assert "timeout must be > 0 (got -1)" in message
    assert "memory_bytes must be at least 8 MiB (got 256)" in message
    assert "pids_limit must be > 0 (got 0)" in message


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"cpus": 0}, "cpus must be > 0 (got 0)"),
        ({"open_files_limit": 3}, "open_files_limit must be at least 16 (got 3)"),
        ({"user": "root"}, "user must be a numeric 'uid:gid'"),
        ({"user": "0:0"}, "user must not be root"),
        ({"user": "1000:0"}, "user must not be in the root group"),
        ({"workdir": "relative"}, "workdir must be an absolute path"),
        ({"workdir": "/etc"}, "outside the system folders"),
        ({"workdir": "/workspace/../proc"}, "without '..'"),
        ({"timeout": "soon"}, "timeout: Input should be a valid number"),
        ({"log_driver": "syslog"}, "log_driver"),
        ({"no_such_setting": 1}, "no_such_setting"),
    ],
    ids=[
        "cpus",
        "open-files",
        "user-name",
        "root",
        "root-group",
        "workdir",
        "system-folder",
        "dot-dot",
        "type",
        "log-driver",
        "unknown",
    ],
)
def test_each_invalid_value_has_a_clear_message(settings: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid sandbox settings") as caught:
        SandboxConfig(**settings)  # type: ignore[arg-type]
    assert expected in str(caught.value)


def test_user_without_group_gets_the_same_gid() -> None:
    assert SandboxConfig(user="2000").user == "2000:2000"


def test_image_languages_are_normalized() -> None:
    assert SandboxConfig(images={"py": "x:1", "sh": "y:2"}).images == {
        "python": "x:1",
        "bash": "y:2",
    }


def test_config_is_frozen() -> None:
    with pytest.raises(ValueError, match="frozen"):
        SandboxConfig().timeout = 1  # type: ignore[misc]
