"""Loopback TCP ports held for one control plane from the moment they are chosen until it stops.

A port found by binding port 0 and closing the probe is free again the moment it is returned: another
control plane starting in the same process (or any process of the machine) may be handed the same
port before the component binds it. A :class:`PortReservations` keeps each probe socket bound - with
``SO_REUSEADDR``, never listening - until :meth:`PortReservations.release`. Linux then gives the port
to no other bind of port 0 (``inet_csk_find_open_port`` skips a port that has an owner) and refuses
it to any socket without ``SO_REUSEADDR``, while the component binds and listens on it: Go's
listeners set ``SO_REUSEADDR`` (``net/sockopt_linux.go``, ``setDefaultListenerSockopts``), and two
sockets with it may share an address while neither listens (``inet_csk_bind_conflict``,
``net/ipv4/inet_connection_sock.c``). A component restarted on its port finds it held, not taken.
"""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


class PortReservations:
    """The ports held for one control plane; :meth:`release` frees them all (idempotent)."""

    def __init__(self) -> None:
        self._held: list[socket.socket] = []

    def reserve(self) -> int:
        """A port of 127.0.0.1 that no other reservation or listener has, held until :meth:`release`."""
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((LOOPBACK, 0))
        except OSError:
            probe.close()
            raise
        self._held.append(probe)
        return int(probe.getsockname()[1])

    @property
    def held(self) -> tuple[int, ...]:
        return tuple(int(probe.getsockname()[1]) for probe in self._held)

    def release(self) -> None:
        for probe in self._held:
            probe.close()
        self._held.clear()
