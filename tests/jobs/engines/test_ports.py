"""The port a server is given (jobs.engines.procs.free_port): free when picked, and picked where
the kernel hands nothing out by itself, so that nothing takes it before the server binds it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from jobs.engines import procs


def _floor() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_a_port_is_picked_below_the_kernels_ephemeral_range_and_is_free() -> None:
    floor = _floor()
    if floor - 10_000 < 1_000:
        pytest.skip(f"this kernel's ephemeral range starts at {floor}: no room below it")
    ports = set()
    for _ in range(20):
        port = procs.free_port()
        # Free as a server binds it: with SO_REUSEADDR, as uvicorn and http.server do, so that a
        # connection another test's server left in TIME_WAIT on it does not count; checked as
        # it is picked, while the other pytest workers' servers pick theirs from the same range.
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
        ports.add(port)
    assert all(10_000 <= port < floor for port in ports), sorted(ports)
    assert len(ports) > 1  # drawn, not one fixed port every process would share


def test_the_ports_the_kernel_hands_out_are_never_picked() -> None:
    """An outgoing connection's own end, and a listener on port 0, are the kernel's: of the
    ephemeral range, which the pick stays out of."""
    floor = _floor()
    if floor - 10_000 < 1_000:
        pytest.skip(f"this kernel's ephemeral range starts at {floor}: no room below it")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with socket.create_connection(listener.getsockname()) as client:
            taken = {listener.getsockname()[1], client.getsockname()[1]}
    assert all(port >= floor for port in taken)
    assert not taken & {procs.free_port() for _ in range(20)}


def test_a_listening_port_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        draws = iter([port, port, port + 1 if port + 1 < 65536 else port - 1])
        monkeypatch.setattr(procs, "_ephemeral_floor", lambda: 65_000)
        monkeypatch.setattr(procs.random.SystemRandom, "randrange", lambda self, a, b: next(draws))
        assert procs.free_port() != port


def test_without_room_below_the_range_the_kernel_chooses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wide = tmp_path / "ip_local_port_range"
    wide.write_text("1024\t65535\n")
    monkeypatch.setattr(procs, "_EPHEMERAL", wide)
    port = procs.free_port()
    assert 1024 <= port <= 65535
    monkeypatch.setattr(procs, "_EPHEMERAL", tmp_path / "missing")
    assert procs._ephemeral_floor() == 0
    assert procs.free_port() > 0
