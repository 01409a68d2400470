"""A throw-away certificate authority and server certificate for the emulator's HTTPS endpoint.

TLS is needed for authentication to work at all: kubectl (client-go) does not send a kubeconfig's
bearer token to a plain ``http://`` server. The CA is generated at start (EC P-256, fast) and
written into the kubeconfig as ``certificate-authority-data``, so every client keeps verifying.
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
from cryptography.x509.oid import NameOID


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


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def generate(hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> ServerCertificate:
    """A fresh CA and a server certificate for ``hosts`` (IP addresses and DNS names), valid 1 day."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("gang-sim-ca"))
        .issuer_name(_name("gang-sim-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
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
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    alternative_names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alternative_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alternative_names.append(x509.DNSName(host))
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("gang-sim"))
        .issuer_name(ca_cert.subject)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alternative_names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return ServerCertificate(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=server_cert.public_bytes(serialization.Encoding.PEM),
        key_pem=server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )
