"""What one running control plane owns alone: its state directory, held ports and certificate authority.

Every file a component reads or writes (certificates, configuration, data, logs) is under
:attr:`Workspace.directory`, a fresh temporary directory, and every port it listens on is held in
:attr:`Workspace.ports` (:mod:`.ports`), so any number of control planes run side by side in one
process. The one path outside it is Kueue's metrics certificate, fixed by Kueue itself
(:func:`gang_sim.testing.real.kueue.ensure_metrics_certificate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gang_sim.apiserver.tls import CertificateAuthority
from gang_sim.testing.real.binaries import Binaries
from gang_sim.testing.real.ports import LOOPBACK, PortReservations

ADMIN_KUBECONFIG = "admin.kubeconfig"
CA_CERTIFICATE = "pki/ca.crt"


@dataclass
class Workspace:
    """One control plane's directory, binaries, CA and ports; :meth:`file` writes into the directory."""

    directory: Path
    binaries: Binaries
    authority: CertificateAuthority
    ports: PortReservations = field(default_factory=PortReservations)

    def __post_init__(self) -> None:
        self.file(CA_CERTIFICATE, self.authority.certificate_pem)

    @property
    def ca_path(self) -> Path:
        return self.directory / CA_CERTIFICATE

    @property
    def admin_kubeconfig(self) -> Path:
        """The admin kubeconfig the components use (written once the apiserver serves)."""
        return self.directory / ADMIN_KUBECONFIG

    def file(self, name: str, content: bytes | str) -> Path:
        """Write ``content`` to ``name`` under the directory (a ``.key`` file with mode 0600); its path."""
        path = self.directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        if name.endswith(".key") or name.endswith(".kubeconfig"):
            path.chmod(0o600)
        return path

    def folder(self, name: str) -> Path:
        path = self.directory / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def serving_files(self, name: str, hosts: tuple[str, ...] = (LOOPBACK, "localhost")) -> tuple[Path, Path]:
        """A serving certificate of this CA for ``hosts``, written as ``pki/<name>.crt`` and ``.key``."""
        return self.authority.serving(name, hosts).write(self.folder("pki"), name)
