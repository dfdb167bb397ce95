"""Errors for people: each names where (file:line), what (model.field) and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    where: str  # "models.yml:12" or "models.yml"
    what: str  # "glm47-flash.litellm.max_tokens", "glm47-flash.command --max-model-len", ...
    message: str  # what is wrong and what to do

    def __str__(self) -> str:
        return f"{self.where}: {self.what}: {self.message}" if self.what else f"{self.where}: {self.message}"


class ConfigError(Exception):
    """One or more problems in models.yml; nothing may be written."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(map(str, problems)))


def print_problems(exc: ConfigError, console) -> None:
    """One red line per problem on a rich console (the CLIs' way of saying exit code 2)."""
    for problem in exc.problems:
        console.print(f"[red]error:[/] {problem}", soft_wrap=True)
