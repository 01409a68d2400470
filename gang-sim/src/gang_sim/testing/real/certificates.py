"""The public-key material of a real control plane started on loopback, as envtest makes it.

One throw-away certificate authority (``gang_sim.apiserver.tls.CertificateAuthority``) signs every
serving certificate (kube-apiserver, the Kueue webhook server, the scheduler's and
controller-manager's health endpoints) and the admin client certificate (``O=system:masters``: the
apiserver's RBAC authorizer lets that group do anything,
https://kubernetes.io/docs/reference/access-authn-authz/rbac/#user-facing-roles). The service
account token signer is a separate RSA key pair (``--service-account-key-file`` /
``--service-account-signing-key-file``, the controller-manager's
``--service-account-private-key-file``). Model: controller-runtime
``pkg/internal/testing/certs/tinyca.go`` and ``controlplane/apiserver.go``.
"""

from __future__ import annotations

import datetime

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gang_sim.apiserver.tls import CertificateAuthority

VALIDITY = datetime.timedelta(days=2)
"""How long a real control plane's certificates are valid: longer than any test session."""


def cluster_authority() -> CertificateAuthority:
    """The CA of one real control plane."""
    return CertificateAuthority("gang-real-cluster-ca", VALIDITY)


def service_account_signer() -> tuple[bytes, bytes]:
    """The PEM private and public keys that sign and verify service account tokens (RSA 2048)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public
