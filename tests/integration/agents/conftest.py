"""Fixtures for the real-agent tests: the pinned agents (installed when missing) and their timings."""

from __future__ import annotations

import pytest

from .install import NpmUnreachable, ensure

TIMINGS: list[str] = []  # one line per agent run, printed at the end of the session


@pytest.fixture(scope="session")
def agent_bin():
    try:
        return ensure()
    except NpmUnreachable as exc:
        pytest.skip(f"coding agents not installed and npm cannot fetch them: {exc}")


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.write_sep("-", "coding agents through the gateway")
        for line in TIMINGS:
            terminalreporter.write_line(line)
