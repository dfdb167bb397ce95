"""Free ports for a local stack (generator/operate/runtime/ports.py): below the kernel's ephemeral range, inside
FREE_PORT_RANGE when set, all different, never handed out twice by one process, free when handed out; and each
pytest-xdist worker of a session picks in a slice of its own (tests/conftest.py)."""

import os
import socket

import pytest

from generator.operate.runtime import ports
from tests.conftest import worker_port_range


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(ports, "_handed_out", set())
    monkeypatch.delenv(ports.RANGE_ENV, raising=False)


def ephemeral_low() -> int:
    return int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])


def test_picks_are_below_the_kernels_ephemeral_range_and_all_different():
    picked = ports.free_ports(50)
    assert len(set(picked)) == 50
    assert all(ports.DEFAULT_RANGE[0] <= p <= ports.DEFAULT_RANGE[1] < ephemeral_low() for p in picked)


class _Unused:
    """What _bindable returns for a port nobody holds: this test's range is free whatever else runs on the machine."""

    def close(self) -> None:
        pass


def test_a_process_never_hands_out_a_port_twice(monkeypatch):
    # every port of the range bindable: a port that another process on this machine holds (CI runs stacks beside
    # the unit tests) would otherwise make the last pick fail (seen once); _bindable's own test is the one below
    monkeypatch.setattr(ports, "_bindable", lambda port: _Unused())
    monkeypatch.setenv(ports.RANGE_ENV, "21000-21019")
    picked = [ports.free_port() for _ in range(15)] + ports.free_ports(5)
    assert sorted(picked) == list(range(21000, 21020))  # the whole range, each port once
    with pytest.raises(OSError, match=r"no 1 free port\(s\) found .* in 21000-21019 \(FREE_PORT_RANGE\)"):
        ports.free_port()


def test_a_port_someone_listens_on_is_never_picked(monkeypatch):
    # a range no tool of ours picks from (the default 20000-32767, compose-test's 15000-19999), below the ephemeral one
    monkeypatch.setenv(ports.RANGE_ENV, "12100-12103")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 12101))
    taken.listen()
    try:
        assert sorted(ports.free_ports(3)) == [12100, 12102, 12103]
    finally:
        taken.close()


def test_consecutive_ports_are_free_in_a_row_and_not_handed_out_again(monkeypatch):
    monkeypatch.setenv(ports.RANGE_ENV, "12200-12209")
    first = ports.consecutive_free_ports(4)
    assert 12200 <= first <= 12206
    assert not {first, first + 1, first + 2, first + 3} & set(ports.free_ports(6))


@pytest.mark.parametrize("value", ["21000", "a-b", "30000-20000", "80-90"])
def test_a_bad_range_is_one_clear_error(monkeypatch, value):
    monkeypatch.setenv(ports.RANGE_ENV, value)
    with pytest.raises(ValueError, match="FREE_PORT_RANGE="):
        ports.free_port()


def test_each_xdist_worker_picks_in_a_slice_of_its_own():
    slices = [tuple(map(int, worker_port_range(f"gw{i}", 2).split("-"))) for i in range(2)]
    assert slices[0][0] == ports.DEFAULT_RANGE[0] and slices[0][1] < slices[1][0]
    assert slices[1][1] <= ports.DEFAULT_RANGE[1]


def test_a_worker_of_a_session_sets_its_slice_before_any_test_picks(monkeypatch):
    import tests.conftest as root

    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    root.pytest_configure(None)
    assert os.environ[ports.RANGE_ENV] == worker_port_range("gw1", 2)
    low, high = map(int, worker_port_range("gw1", 2).split("-"))
    assert all(low <= p <= high for p in ports.free_ports(20))
