"""The per-run certificate authority of secret headers, and the trust bundle given to a run.

The authority's key is made when a run with secret headers starts and lives only in
this process's memory; its certificate goes into the run's mounted folder, appended
to the host's trusted roots, so that the program trusts the certificates the proxy
shows for the hosts it intercepts (and still every public one for the rest). Leaf
keys reach OpenSSL through an anonymous memory file, never a file on disk.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID_FOR = datetime.timedelta(days=2)
_BACKDATED = datetime.timedelta(hours=1)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass
class CertificateAuthority:
    """A throwaway authority that signs a certificate per intercepted host."""

    common_name: str = "sandcrew run authority"
    _key: ec.EllipticCurvePrivateKey = field(init=False, repr=False)
    certificate: x509.Certificate = field(init=False)
    _leaves: dict[str, bytes] = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(self.common_name))
            .issuer_name(_name(self.common_name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATED)
            .not_valid_after(now + _VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                _key_usage("key_cert_sign", "crl_sign"),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def leaf_pem(self, host: str) -> bytes:
        """Certificate and key (PEM, in that order) for ``host``, made once per host."""
        if host not in self._leaves:
            key = ec.generate_private_key(ec.SECP256R1())
            now = datetime.datetime.now(datetime.UTC)
            try:
                alternative: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
            except ValueError:
                alternative = x509.DNSName(host)
            certificate = (
                x509.CertificateBuilder()
                .subject_name(_name(host))
                .issuer_name(self.certificate.subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - _BACKDATED)
                .not_valid_after(now + _VALID_FOR)
                .add_extension(x509.SubjectAlternativeName([alternative]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(
                    x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
                )
                .add_extension(
                    x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                    critical=False,
                )
                .sign(self._key, hashes.SHA256())
            )
            self._leaves[host] = certificate.public_bytes(serialization.Encoding.PEM) + _pem_key(
                key
            )
        return self._leaves[host]

    def server_context(self, host: str) -> ssl.SSLContext:
        """A server-side TLS context showing ``host``'s certificate."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        load_chain_from_memory(context, self.leaf_pem(host))
        return context


def load_chain_from_memory(context: ssl.SSLContext, pem: bytes) -> None:
    """``context.load_cert_chain`` from bytes: through an anonymous memory file, not the disk."""
    descriptor = os.memfd_create("sandcrew-leaf", os.MFD_CLOEXEC)
    try:
        os.write(descriptor, pem)
        context.load_cert_chain(f"/proc/self/fd/{descriptor}")
    finally:
        os.close(descriptor)


def host_trusted_roots() -> bytes:
    """The PEM roots this host trusts (``SSL_CERT_FILE`` first, then OpenSSL's default file)."""
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and os.path.isfile(candidate):
            with open(candidate, "rb") as handle:
                return handle.read()
    return b""


_KEY_USAGES = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
    "encipher_only",
    "decipher_only",
)


def _key_usage(*allowed: str) -> x509.KeyUsage:
    """A key-usage extension that allows ``allowed`` and nothing else."""
    return x509.KeyUsage(**{usage: usage in allowed for usage in _KEY_USAGES})
