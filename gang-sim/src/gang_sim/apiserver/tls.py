"""A throw-away certificate authority, and the server certificate of the emulator's HTTPS endpoint.

TLS is needed for authentication to work at all: kubectl (client-go) does not send a kubeconfig's
bearer token to a plain ``http://`` server. The CA is generated at start (EC P-256, fast) and
written into the kubeconfig as ``certificate-authority-data``, so every client keeps verifying.
The same :class:`CertificateAuthority` signs the serving and client certificates of a real control
plane started on loopback (``gang_sim.testing.real.certificates``), as controller-runtime's envtest
does with its ``pkg/internal/testing/certs/tinyca.go``.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class ServerCertificate:
    """PEM bytes of the CA certificate, the server certificate and the server key."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def ssl_context(self) -> ssl.SSLContext:
        """A server-side context; the key material only touches a private temporary directory."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory(prefix="gang-sim-tls-") as folder:
            cert_path, key_path = Path(folder) / "server.crt", Path(folder) / "server.key"
            cert_path.write_bytes(self.cert_pem)
            key_path.write_bytes(self.key_pem)
            key_path.chmod(0o600)
            context.load_cert_chain(cert_path, key_path)
        return context


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, validity: datetime.timedelta
) -> x509.CertificateBuilder:
    """A certificate of ``key`` for ``subject`` valid from five minutes ago (clocks a little behind)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + validity)
    )


@dataclass(frozen=True)
class KeyPair:
    """PEM bytes of a certificate and its private key."""

    certificate_pem: bytes
    key_pem: bytes

    def write(self, folder: Path, stem: str) -> tuple[Path, Path]:
        """Write ``<stem>.crt`` and ``<stem>.key`` (mode 0600) into ``folder``; their paths."""
        certificate, key = folder / f"{stem}.crt", folder / f"{stem}.key"
        certificate.write_bytes(self.certificate_pem)
        key.write_bytes(self.key_pem)
        key.chmod(0o600)
        return certificate, key


class CertificateAuthority:
    """A self-signed CA (EC P-256) that issues serving and client certificates, each valid for ``validity``."""

    def __init__(self, common_name: str, validity: datetime.timedelta = datetime.timedelta(days=1)) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._validity = validity
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self._certificate = (
            _builder(name, name, self._key, validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def certificate_pem(self) -> bytes:
        return self._certificate.public_bytes(serialization.Encoding.PEM)

    def _issue(self, subject: x509.Name, usage: x509.ObjectIdentifier, hosts: tuple[str, ...] = ()) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = _builder(subject, self._certificate.subject, key, self._validity)
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        return KeyPair(certificate.public_bytes(serialization.Encoding.PEM), _private_pem(key))

    def serving(self, common_name: str, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> KeyPair:
        """A server certificate for ``hosts`` (IP addresses and DNS names)."""
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        return self._issue(subject, ExtendedKeyUsageOID.SERVER_AUTH, hosts)

    def client(self, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
        """A client certificate: kube-apiserver reads the user from CN and the groups from O
        (https://kubernetes.io/docs/reference/access-authn-authz/authentication/#x509-client-certificates)."""
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, user)]
        attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
        return self._issue(x509.Name(attributes), ExtendedKeyUsageOID.CLIENT_AUTH)


def generate(hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> ServerCertificate:
    """A fresh CA and a server certificate for ``hosts`` (IP addresses and DNS names), valid 1 day."""
    authority = CertificateAuthority("gang-sim-ca")
    server = authority.serving("gang-sim", hosts)
    return ServerCertificate(ca_pem=authority.certificate_pem, cert_pem=server.certificate_pem, key_pem=server.key_pem)
