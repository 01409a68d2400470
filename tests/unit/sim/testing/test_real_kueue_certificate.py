"""Kueue's metrics certificate at its fixed path, shared by every Kueue on the machine
(``gang_sim.testing.real.kueue.ensure_metrics_certificate``): written once as a matching pair, kept
while it matches, replaced when it does not, one pair however many control planes start at once."""

from __future__ import annotations

import ssl
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gang_sim.apiserver.tls import CertificateAuthority
from gang_sim.testing.real.kueue import ensure_metrics_certificate


def is_pair(directory: Path) -> bool:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(directory / "tls.crt", directory / "tls.key")
    except ssl.SSLError:
        return False
    return True


def test_written_once_and_kept_while_it_matches(tmp_path: Path) -> None:
    directory = tmp_path / "certs"
    ensure_metrics_certificate(directory)
    assert is_pair(directory) and (directory / "tls.key").stat().st_mode & 0o777 == 0o600
    written = (directory / "tls.crt").read_bytes()
    ensure_metrics_certificate(directory)
    assert (directory / "tls.crt").read_bytes() == written


def test_a_pair_that_does_not_match_is_replaced(tmp_path: Path) -> None:
    directory = tmp_path / "certs"
    directory.mkdir()
    (directory / "tls.crt").write_bytes(CertificateAuthority("one").serving("a").certificate_pem)
    (directory / "tls.key").write_bytes(CertificateAuthority("two").serving("b").key_pem)
    assert not is_pair(directory)
    ensure_metrics_certificate(directory)
    assert is_pair(directory)


def test_control_planes_starting_at_once_leave_one_matching_pair(tmp_path: Path) -> None:
    directory = tmp_path / "certs"
    with ThreadPoolExecutor(8) as pool:
        for done in [pool.submit(ensure_metrics_certificate, directory) for _ in range(16)]:
            done.result()
    assert is_pair(directory)
    assert sorted(path.name for path in directory.iterdir()) == [".lock", "tls.crt", "tls.key"]
