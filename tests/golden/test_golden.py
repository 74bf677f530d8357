"""The emitted project of every golden case is byte-identical to its stored files: a refactor
changes no emitted text, and a change that does shows up here as a diff to review (then
``python -m tests.golden.regen CASE`` and commit the new files with the reason)."""

from __future__ import annotations

import difflib

import pytest

from tests.golden.cases import CASES
from tests.golden.regen import FILES, emitted


@pytest.mark.parametrize("name", sorted(CASES))
def test_emitted_project_matches_golden_files(name: str) -> None:
    stored = {str(p.relative_to(FILES / name)): p.read_text()
              for p in sorted((FILES / name).rglob("*")) if p.is_file()}
    got = emitted(name)
    assert sorted(got) == sorted(stored), f"{name}: files differ"
    for rel, text in got.items():
        if text != stored[rel]:
            diff = "".join(list(difflib.unified_diff(
                stored[rel].splitlines(True), text.splitlines(True), f"golden/{rel}",
                f"emitted/{rel}"))[:60])
            pytest.fail(f"{name}/{rel} differs from its golden file "
                        f"(python -m tests.golden.regen {name}):\n{diff}")


def test_every_golden_case_has_files() -> None:
    assert sorted(p.name for p in FILES.iterdir() if p.is_dir()) == sorted(CASES)
