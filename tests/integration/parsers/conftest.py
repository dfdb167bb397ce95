"""The matrix runs on the parser families' stacks (tests/integration/conftest.py `family_stacks`: the families of
examples/cpu-parsers/models.yml, one stream interval at a time); the last is stopped when the matrix is done, not at the
end of the session (the stack tests after it do not need it)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def parsers(family_stacks):
    yield family_stacks
    family_stacks.stop()
