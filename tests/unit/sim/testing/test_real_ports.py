"""Ports held for a real control plane (``gang_sim.testing.real.ports``): nobody else is handed them
while held, the component binds them as Go's listeners do, and release frees them."""

from __future__ import annotations

import socket

import pytest

from gang_sim.testing.real.ports import LOOPBACK, PortReservations


def plain_bind(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, port))


def test_held_ports_are_distinct_and_refused_to_every_other_bind() -> None:
    reservations = PortReservations()
    try:
        held = {reservations.reserve() for _ in range(8)}
        assert len(held) == 8 and set(reservations.held) == held
        for port in held:
            with pytest.raises(OSError):
                plain_bind(port)
        handed_out = set()
        for _ in range(500):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
                other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                other.bind((LOOPBACK, 0))
                handed_out.add(other.getsockname()[1])
        assert not held & handed_out
    finally:
        reservations.release()


def test_a_listener_with_reuse_address_serves_on_a_held_port_as_a_go_component_does() -> None:
    reservations = PortReservations()
    try:
        port = reservations.reserve()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((LOOPBACK, port))
            listener.listen()
            with socket.create_connection((LOOPBACK, port), timeout=5) as client:
                accepted, _ = listener.accept()
                with accepted:
                    client.sendall(b"ping")
                    assert accepted.recv(4) == b"ping"
    finally:
        reservations.release()


def test_release_frees_every_port_and_may_be_repeated() -> None:
    reservations = PortReservations()
    held = [reservations.reserve(), reservations.reserve()]
    reservations.release()
    reservations.release()
    assert reservations.held == ()
    for port in held:
        plain_bind(port)
