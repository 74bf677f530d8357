"""Rewrite the golden files from the current compiler (review the diff before committing)::

    python -m tests.golden.regen [CASE ...]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from ascendsched.emit_ascendc.project import emit_project
from ascendsched.lower.pipeline import lower
from tests.golden.cases import CASES

FILES = Path(__file__).resolve().parent / "files"


def emitted(name: str) -> dict[str, str]:
    """Every file of the project emitted for case ``name``: relative path -> text."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # speed-intent warnings are tested elsewhere
        kernel = lower(CASES[name]())
    with tempfile.TemporaryDirectory() as d:
        emit_project(kernel, Path(d))
        return {str(p.relative_to(d)): p.read_text() for p in sorted(Path(d).rglob("*"))
                if p.is_file()}


def main(names: list[str]) -> None:
    for name in names or sorted(CASES):
        out = FILES / name
        shutil.rmtree(out, ignore_errors=True)
        for rel, text in emitted(name).items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_text(text)
        print(f"wrote {out.relative_to(FILES.parents[2])}")


if __name__ == "__main__":
    main(sys.argv[1:])
