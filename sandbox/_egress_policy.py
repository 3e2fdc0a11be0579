"""Which hosts a run may reach, and which secret headers the host proxy adds for it.

Pure data and decisions: nothing here resolves a name or opens a connection. The
proxy (:mod:`._egress_proxy`) asks :meth:`EgressPolicy.decide` before it resolves
anything, then :func:`refused_address` for each address a name resolved to.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..core._settings_model import SettingsModel

DEFAULT_PORTS = (443, 80)
"""The ports an entry without one allows: HTTPS and HTTP."""

SECRET_FILE_LIMIT = 64 * 1024
"""Largest file a ``{file:PATH}`` placeholder may read."""

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
_PLACEHOLDER = re.compile(r"\{(env|file):([^{}]+)\}")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Header names the proxy sets or that frame a message: never given by a secret header.
_FRAMING_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer"}
)

# Ranges a resolved address may be in only when the entry names that address (or
# localhost): the machine itself, private networks, link-local (cloud metadata),
# carrier-grade NAT, multicast and the unspecified address.
_REFUSED_NETWORKS = tuple(
    ipaddress.ip_network(network)
    for network in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "255.255.255.255/32",
        "::/128",
        "::1/128",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    )
)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def refused_address(address: IPAddress) -> str | None:
    """Why ``address`` may not be dialled for an entry that names a host, or ``None``.

    IPv4 addresses written as IPv6 (``::ffff:a.b.c.d``, 6to4, NAT64 forms) are judged by
    the IPv4 address they carry.
    """
    if isinstance(address, ipaddress.IPv6Address):
        carried = address.ipv4_mapped or address.sixtofour
        if carried is None and address in ipaddress.ip_network("64:ff9b::/96"):
            carried = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if carried is not None:
            return refused_address(carried)
    for network in _REFUSED_NETWORKS:
        if address in network:
            return f"{address} is in a private or reserved range ({network})"
    return None


def normalize_host(text: str) -> str:
    """A host name in the form the policy compares: lower case, IDNA, no final dot.

    Raises :class:`ValueError` for a name that is no host name.
    """
    host = text.strip().rstrip(".").lower()
    if not host:
        raise ValueError("an empty host name")
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        pass
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"{text!r} is not a valid host name") from None
    labels = ascii_host.split(".")
    if len(ascii_host) > 253 or not all(_LABEL.match(label) for label in labels):
        raise ValueError(f"{text!r} is not a valid host name")
    return ascii_host


def _split_port(text: str) -> tuple[str, int | None]:
    """``HOST``, ``HOST:PORT``, ``[IPv6]`` or ``[IPv6]:PORT``."""
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"{text!r}: an IPv6 address is written [2001:db8::1]:443")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    elif ":" in text:
        raise ValueError(f"{text!r}: an IPv6 address is written in brackets, [2001:db8::1]:443")
    else:
        host, port_text = text, None
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
    return host, int(port_text)


class HostRule(BaseModel):
    """One ``--allow-host`` entry: a host (``*.`` for its subdomains) and the ports allowed.

    Written and read as text: ``pypi.org``, ``*.example.org:8443``, ``localhost:11434``,
    ``[2001:db8::1]:443``. An entry that names an address or ``localhost`` allows that
    address even in a private range; a name never does.
    """

    model_config = ConfigDict(frozen=True)

    host: str
    """The host, normalized; ``*.example.org`` matches every subdomain (not the name itself)."""
    ports: tuple[int, ...] = DEFAULT_PORTS

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_host_rule(value).model_dump()
        return value

    @property
    def wildcard(self) -> bool:
        return self.host.startswith("*.")

    @property
    def names_address(self) -> bool:
        """The entry names an address or ``localhost``: private ranges are allowed for it."""
        return self.host == "localhost" or is_address(self.host)

    def matches(self, host: str, port: int) -> bool:
        if port not in self.ports:
            return False
        if self.wildcard:
            return host.endswith(self.host[1:])
        return host == self.host

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.ports == DEFAULT_PORTS:
            return host
        return f"{host}:{self.ports[0]}"


def is_address(host: str) -> bool:
    """``host`` is an IP address (v4 or v6), not a name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def parse_host_rule(text: str) -> HostRule:
    """``HOST[:PORT]`` → :class:`HostRule`; raises :class:`ValueError` saying what is wrong."""
    host_text, port = _split_port(text.strip())
    wildcard = host_text.startswith("*.")
    host = normalize_host(host_text[2:] if wildcard else host_text)
    if wildcard:
        if is_address(host) or "." not in host:
            raise ValueError(
                f"{text!r}: a wildcard covers the subdomains of a domain with at least two "
                "labels, such as *.example.org"
            )
        host = "*." + host
    elif "*" in host_text:
        raise ValueError(f"{text!r}: a wildcard is written *.example.org")
    return HostRule(host=host, ports=DEFAULT_PORTS if port is None else (port,))


class SecretHeader(BaseModel):
    """One ``--secret-header``: a header the host proxy adds to requests to one host.

    Written ``HOST[:PORT]=Name: value``, the value holding ``{env:VAR}`` or
    ``{file:PATH}`` placeholders that are read on the host when a run starts (a
    literal secret is refused: it would sit in shell histories and process lists).
    ``http://HOST:PORT=...`` binds plain HTTP (a local server); otherwise HTTPS, and
    the header is added only after the upstream's certificate was verified for that host.
    """

    model_config = ConfigDict(frozen=True)

    scheme: Literal["https", "http"] = "https"
    host: str
    port: int
    name: str
    template: str
    """The value with its placeholders, never the secret itself."""

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_secret_header(value).model_dump()
        return value

    @field_validator("template")
    @classmethod
    def _placeholders_only(cls, value: str) -> str:
        _check_template(value)
        return value

    @property
    def rule(self) -> HostRule:
        return HostRule(host=self.host, ports=(self.port,))

    def resolve(self, environment: dict[str, str] | None = None) -> str:
        """The header's value with its placeholders read; raises :class:`ValueError`."""
        variables = os.environ if environment is None else environment

        def read(match: re.Match[str]) -> str:
            kind, where = match.group(1), match.group(2)
            if kind == "env":
                if where not in variables:
                    raise ValueError(
                        f"secret header {self.name} for {self.host}: "
                        f"the variable {where} is not set"
                    )
                return variables[where]
            return _read_secret_file(where, self)

        value = _PLACEHOLDER.sub(read, self.template).strip()
        if not value or any(character in value for character in "\r\n\0"):
            raise ValueError(
                f"secret header {self.name} for {self.host}: the value is empty or holds "
                "a line break or NUL"
            )
        return value

    def __str__(self) -> str:
        prefix = "http://" if self.scheme == "http" else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{prefix}{host}:{self.port}={self.name}: {self.template}"


def _read_secret_file(path: str, header: SecretHeader) -> str:
    try:
        with open(os.path.expanduser(path), "rb") as handle:
            data = handle.read(SECRET_FILE_LIMIT + 1)
    except OSError as error:
        raise ValueError(
            f"secret header {header.name} for {header.host}: cannot read {path}: {error.strerror}"
        ) from None
    if len(data) > SECRET_FILE_LIMIT:
        raise ValueError(f"secret header {header.name}: {path} is over {SECRET_FILE_LIMIT} bytes")
    try:
        return data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ValueError(f"secret header {header.name}: {path} is not UTF-8 text") from None


# Settings errors show the value they refuse unless the message says "(got ...)" itself.
_NOT_SHOWN = "(got a value that is not shown: it may hold a secret)"


def _check_template(template: str) -> None:
    placeholders = _PLACEHOLDER.findall(template)
    if not placeholders:
        raise ValueError(
            "a secret header's value must come from {env:VAR} or {file:PATH}: a literal "
            f"secret on the command line is refused {_NOT_SHOWN}"
        )
    for kind, where in placeholders:
        if kind == "env" and not _ENV_NAME.match(where):
            raise ValueError(f"{{env:{where}}}: not a variable name {_NOT_SHOWN}")
    if "{" in _PLACEHOLDER.sub("", template) or "}" in _PLACEHOLDER.sub("", template):
        raise ValueError(
            f"a secret header's value holds a brace that is no {{env:}} or {{file:}} {_NOT_SHOWN}"
        )
    if any(character in template for character in "\r\n\0"):
        raise ValueError(f"a secret header's value holds a line break or NUL {_NOT_SHOWN}")


def parse_secret_header(text: str) -> SecretHeader:
    """``[http://]HOST[:PORT]=Name: value`` → :class:`SecretHeader`; :class:`ValueError` if not."""
    target, equals, header = text.partition("=")
    if not equals:
        raise ValueError(f"{text!r}: a secret header is written 'HOST[:PORT]=Name: value'")
    scheme: Literal["https", "http"] = "https"
    target = target.strip()
    if target.startswith("http://"):
        scheme, target = "http", target[len("http://") :]
    elif target.startswith("https://"):
        target = target[len("https://") :]
    host_text, port = _split_port(target.rstrip("/"))
    if "*" in host_text:
        raise ValueError(f"{text!r}: a secret header names one host, not a wildcard")
    host = normalize_host(host_text)
    name, colon, template = header.partition(":")
    name = name.strip()
    if not colon or not _HEADER_NAME.match(name):
        raise ValueError(f"{text!r}: after '=' comes 'Name: value' with a header name")
    if name.lower() in _FRAMING_HEADERS:
        raise ValueError(f"{text!r}: the proxy does not let a secret replace {name}")
    template = template.strip()
    _check_template(template)
    if port is None:
        port = 80 if scheme == "http" else 443
    return SecretHeader(scheme=scheme, host=host, port=port, name=name, template=template)


@dataclass(frozen=True)
class Decision:
    """Whether a request to ``host:port`` may go out, and the entry that allowed it."""

    allowed: bool
    reason: str
    rule: HostRule | None = None
    secret: SecretHeader | None = None


class EgressPolicy(SettingsModel):
    """A run's network by policy: the hosts it may reach and the secret headers added for it.

    ``allow`` and ``secret_headers`` take text (``"pypi.org"``,
    ``"api.example.com=Authorization: Bearer {env:TOKEN}"``) or parsed entries. A host
    with a secret header is allowed on its port without being listed.
    """

    settings_title: ClassVar[str] = "network policy"

    allow: tuple[HostRule, ...] = ()
    secret_headers: tuple[SecretHeader, ...] = Field(default=())
    max_connections: int = 64
    """Connections of one run open at once through the proxy."""
    max_events: int = 1000
    """Requests recorded in the result; later ones are counted, not kept."""
    idle_seconds: float = 60.0
    """A connection with no byte either way for this long is closed."""

    @model_validator(mode="after")
    def _one_secret_per_host(self) -> EgressPolicy:
        seen: set[tuple[str, int]] = set()
        for header in self.secret_headers:
            key = (header.host, header.port)
            if key in seen:
                raise ValueError(
                    f"two secret headers for {header.host}:{header.port}; "
                    "give one header per host and port"
                )
            seen.add(key)
        if self.max_connections < 1 or self.max_events < 0 or not self.idle_seconds > 0:
            raise ValueError("max_connections ≥ 1, max_events ≥ 0 and idle_seconds > 0")
        return self

    @classmethod
    def from_text(
        cls, *, allow: Iterable[str] = (), secret_headers: Iterable[str] = ()
    ) -> EgressPolicy:
        """A policy from entries as a person writes them (``--allow-host``, ``--secret-header``)."""
        return cls.model_validate({"allow": list(allow), "secret_headers": list(secret_headers)})

    @property
    def entries(self) -> tuple[str, ...]:
        """Each host the policy lets through, as text: the allow-list's entries, then the
        hosts of secret headers not already listed (``HOST:PORT``)."""
        return tuple(self._entry_rules())

    def entries_naming(self, name: str) -> tuple[str, ...]:
        """The entries written as ``name``, or whose host is ``name`` (any of its ports)."""
        return tuple(
            entry for entry, rule in self._entry_rules().items() if name in (entry, rule.host)
        )

    def _entry_rules(self) -> dict[str, HostRule]:
        rules = {str(rule): rule for rule in self.allow}
        for header in self.secret_headers:
            if not any(rule.matches(header.host, header.port) for rule in self.allow):
                rules.setdefault(str(header.rule), header.rule)
        return rules

    def narrowed(self, entries: Iterable[str]) -> EgressPolicy:
        """This policy with only the ``entries`` chosen (texts of :attr:`entries`) and the
        secret headers of their hosts: what a server lets a client pick, never widen.
        An entry this policy does not have raises :class:`ValueError` naming what it has."""
        chosen = list(dict.fromkeys(entries))
        unknown = [entry for entry in chosen if entry not in self.entries]
        if unknown:
            offered = ", ".join(self.entries) or "none"
            raise ValueError(f"not allowed here: {', '.join(unknown)} (allowed: {offered})")
        rules = tuple(rule for rule in self.allow if str(rule) in chosen)
        headers = tuple(
            header
            for header in self.secret_headers
            if str(header.rule) in chosen or any(r.matches(header.host, header.port) for r in rules)
        )
        return self.model_copy(update={"allow": rules, "secret_headers": headers})

    def secret_for(self, host: str, port: int, scheme: str) -> SecretHeader | None:
        for header in self.secret_headers:
            if (header.host, header.port, header.scheme) == (host, port, scheme):
                return header
        return None

    def decide(self, host: str, port: int) -> Decision:
        """Allowed or not, from the entries alone: nothing is resolved here."""
        for header in self.secret_headers:
            if header.host == host and header.port == port:
                return Decision(True, f"secret header for {header.host}", header.rule, header)
        for rule in self.allow:
            if rule.matches(host, port):
                return Decision(True, f"allowed by {rule}", rule)
        listed = ", ".join(str(rule) for rule in self.allow) or "none"
        return Decision(False, f"{host}:{port} is not on the allow-list (allowed: {listed})")
