"""The public-key material of a real control plane started on loopback, as envtest makes it.

One throw-away certificate authority signs every serving certificate (kube-apiserver, the Kueue
webhook server, the scheduler's and controller-manager's health endpoints) and the admin client
certificate (``O=system:masters``: the apiserver's RBAC authorizer lets that group do anything,
https://kubernetes.io/docs/reference/access-authn-authz/rbac/#user-facing-roles). The service
account token signer is a separate RSA key pair (``--service-account-key-file`` /
``--service-account-signing-key-file``, the controller-manager's
``--service-account-private-key-file``). Model: controller-runtime
``pkg/internal/testing/certs/tinyca.go`` and ``controlplane/apiserver.go``.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=2)


def _private_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
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
    """A self-signed CA (EC P-256) that issues serving and client certificates, valid two days."""

    def __init__(self, common_name: str = "gang-real-cluster-ca") -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self._certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
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
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
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
        """A client certificate: the apiserver reads the user from CN and the groups from O."""
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, user)]
        attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
        return self._issue(x509.Name(attributes), ExtendedKeyUsageOID.CLIENT_AUTH)


def service_account_signer() -> tuple[bytes, bytes]:
    """The PEM private and public keys that sign and verify service account tokens (RSA 2048)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _private_pem(key), public
