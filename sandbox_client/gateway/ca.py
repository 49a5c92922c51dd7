"""The gateway's own certificate authority: made once per deployment, minting host certificates.

A credential rule must see the request to add a secret, so the gateway terminates the sandbox's
TLS with a certificate for the requested host, signed by this CA. The CA certificate (public) is
put in every sandbox's trust; its private key never leaves the gateway's host (a 0600 file in
the gateway's directory). Certificates come from the ``cryptography`` package.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT_FILE = "ca.pem"
TRUST_BUNDLE_FILE = "ca-bundle.pem"
SYSTEM_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")  # Debian's ca-certificates
CA_KEY_FILE = "ca-key.pem"
CA_VALID_DAYS = 3650
HOST_VALID_DAYS = 90  # re-minted at start; well under the 398 days clients accept
MAX_HOST_CONTEXTS = 1024
"""Host contexts kept (the least recently used goes first): every CONNECT is terminated,
blocked hosts' too, so a sandbox naming new hosts without end must not grow the cache."""


@dataclass
class CertificateAuthority:
    """A CA certificate and key, and the host contexts minted from them (cached per host,
    at most ``max_contexts``, the least recently used dropped first)."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    _leaf_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    max_contexts: int = MAX_HOST_CONTEXTS
    _contexts: OrderedDict[str, ssl.SSLContext] = field(default_factory=OrderedDict)
    _contexts_lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load_or_create(cls, directory: Path) -> CertificateAuthority:
        """The CA stored in ``directory``, made there first if absent (key file mode 0600).

        Raises:
            OSError: the directory cannot be made or read.
            ValueError: the files exist but do not hold a certificate and its key.
        """
        cert_path, key_path = directory / CA_CERT_FILE, directory / CA_KEY_FILE
        if not cert_path.exists():
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            authority = cls.create()
            _write_private(key_path, authority.key_pem())
            _write_private(cert_path, authority.cert_pem(), mode=0o644)
            return authority
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_path} does not hold an EC private key")
        return cls(cert, key)

    @classmethod
    def create(cls, common_name: str = "Warroom egress gateway CA") -> CertificateAuthority:
        """A new CA (EC P-256, valid ten years), in memory."""
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=CA_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    def cert_pem(self) -> bytes:
        """The CA certificate, PEM: what sandboxes trust."""
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        """The CA private key, PEM (unencrypted: the file's mode protects it)."""
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def write_trust(self, directory: Path, system_bundle: Path = SYSTEM_BUNDLE) -> TrustFiles:
        """Write what sandboxes trust into ``directory``: the CA alone, and the system's CAs
        plus this CA (tunnelled hosts keep their public certificates). Blocking file I/O.

        Raises:
            OSError: ``directory`` cannot be written.
        """
        directory.mkdir(parents=True, exist_ok=True)
        ca_path, bundle_path = directory / CA_CERT_FILE, directory / TRUST_BUNDLE_FILE
        system = system_bundle.read_bytes() if system_bundle.exists() else b""
        ca_path.write_bytes(self.cert_pem())
        bundle_path.write_bytes(system.rstrip(b"\n") + b"\n" + self.cert_pem())
        return TrustFiles(ca_cert=ca_path, ca_bundle=bundle_path)

    def server_context(self, host: str) -> ssl.SSLContext:
        """A server-side TLS context presenting a certificate for ``host`` (cached, at most
        ``max_contexts`` hosts).

        CPU-bound the first time for a host (a signature): call it off the event loop.
        """
        host = host.lower()
        with self._contexts_lock:  # called from several threads at once
            context = self._contexts.get(host)
            if context is not None:
                self._contexts.move_to_end(host)
                return context
        context = self._mint(host)  # outside the lock: two first calls may both mint
        with self._contexts_lock:
            self._contexts[host] = context
            self._contexts.move_to_end(host)
            while len(self._contexts) > self.max_contexts:
                self._contexts.popitem(last=False)
        return context

    def host_certificate_pem(self, host: str) -> HostCertificate:
        """A certificate for ``host`` (a DNS name or an IP address) signed by this CA, PEM.

        The chain holds the host certificate then the CA's; all hosts share one key.
        """
        now = dt.datetime.now(dt.UTC)
        try:
            san: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            san = x509.DNSName(host)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host[:64])]))
            .issuer_name(self.cert.subject)
            .public_key(self._leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=HOST_VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName([san]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), False
            )
            .sign(self.key, hashes.SHA256())
        )
        key = self._leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return HostCertificate(cert.public_bytes(serialization.Encoding.PEM) + self.cert_pem(), key)

    def _mint(self, host: str) -> ssl.SSLContext:
        pem = self.host_certificate_pem(host)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["http/1.1"])
        # ssl loads certificates from files only: write both to a private temporary file
        with tempfile.NamedTemporaryFile(suffix=".pem") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(pem.key + pem.cert)
            handle.flush()
            context.load_cert_chain(handle.name)
        return context


@dataclass(frozen=True)
class TrustFiles:
    """Host paths of the files a sandbox trusts (see ``write_trust``)."""

    ca_cert: Path
    ca_bundle: Path


@dataclass(frozen=True)
class HostCertificate:
    """PEM bytes of a host certificate chain and its private key."""

    cert: bytes
    key: bytes


def _write_private(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
