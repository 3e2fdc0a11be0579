"""What the sandbox needs of the host: its Docker engine, this process's signals, the
containers a killed process left behind, and what ``sandcrew doctor`` reports."""

import typing

# Loaded on first use (see sandcrew.core._lazy): `sandcrew` starts without Docker's SDK.
if typing.TYPE_CHECKING:
    from ._docker_client import (
        connect_docker as connect_docker,
        docker_endpoint as docker_endpoint,
    )
    from ._reaper import (
        reap_orphans as reap_orphans,
    )
    from ._seccomp import (
        describe_seccomp_profile as describe_seccomp_profile,
    )
    from ._signals import (
        treat_sigterm_as_interrupt as treat_sigterm_as_interrupt,
    )
    from ._uids import (
        describe_uid_leases as describe_uid_leases,
    )
else:
    from ..core import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(
        __name__,
        {
            "connect_docker": "._docker_client",
            "docker_endpoint": "._docker_client",
            "reap_orphans": "._reaper",
            "describe_seccomp_profile": "._seccomp",
            "treat_sigterm_as_interrupt": "._signals",
            "describe_uid_leases": "._uids",
        },
    )
