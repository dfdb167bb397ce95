"""bench/arms.py's clean-up: every gateway a bench started is stopped, also when stopping one of them fails (a
SIGTERM's exit or a closed stdout in the middle of the clean-up left the next gateway running)."""

from __future__ import annotations

import pytest

from bench.arms import stop_all


class Stack:
    def __init__(self, name: str, stopped: list[str], fails: BaseException | None = None):
        self.name, self.stopped, self.fails = name, stopped, fails

    def stop(self) -> None:
        self.stopped.append(self.name)
        if self.fails is not None:
            raise self.fails


def test_every_stack_is_stopped_when_one_stop_raises_and_the_error_is_raised_after():
    stopped: list[str] = []
    stacks = [Stack("default", stopped), Stack("generated", stopped, SystemExit(143)), Stack("2w", stopped)]
    with pytest.raises(SystemExit):
        stop_all(stacks)  # type: ignore[arg-type]  (only stop() is called)
    assert sorted(stopped) == ["2w", "default", "generated"]


def test_all_stopped_without_an_error():
    stopped: list[str] = []
    stop_all([Stack("a", stopped), Stack("b", stopped)])  # type: ignore[list-item]
    assert sorted(stopped) == ["a", "b"]
