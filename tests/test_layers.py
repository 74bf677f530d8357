"""DESIGN.md's layering rule, read from the source: a lower layer never imports a higher one.

Every ``ascendsched.*`` import (lazy ones inside functions included) goes down or sideways in
``LAYER``. The ``ascendsched/`` folder is two ends: its low layer (errors, dtypes) under every
stage, its top (``api/``) over them; the command (``api/cli.py``, ``api/tune_cli.py``) sits
over ``benchmarks/``, whose scripts call ``api/compile.py`` and ``api/check.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# unit -> layer; a unit imports units of its own layer or lower only
LAYER = {
    "errors": 0, "dtypes": 1, "target": 1, "algo": 2, "schedule": 3, "lower": 4,
    "emit_ascendc": 5, "sim": 5, "autotune": 6,
    "api": 7,  # compile, check, numerics, sync_minimality
    "benchmarks": 8,
    "api.cli": 9, "api.tune_cli": 9,
}
STAGE_DIRS = ("algo", "schedule", "target", "lower", "emit_ascendc", "sim", "autotune",
              "benchmarks")


def _unit_of_file(path: Path) -> str:
    rel = path.relative_to(ROOT)
    if rel.parts[0] != "ascendsched":
        return rel.parts[0]
    if rel.parts[1] == "api":
        stem = f"api.{path.stem}"
        return stem if stem in LAYER else "api"
    return path.stem


def _unit_of_module(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "ascendsched" or len(parts) < 2:
        return None
    if parts[1] == "api":
        sub = ".".join(parts[1:3])
        return sub if sub in LAYER else "api"
    return parts[1]


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out += [f"{node.module}.{a.name}" for a in node.names]  # from ascendsched import x
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def test_no_layer_imports_a_higher_one() -> None:
    files = [f for d in STAGE_DIRS + ("ascendsched",) for f in (ROOT / d).rglob("*.py")]
    assert len(files) > 100
    wrong = []
    for f in files:
        src = _unit_of_file(f)
        if src == "__init__":
            continue
        for mod in _imports(f):
            dst = _unit_of_module(mod)
            if dst in LAYER and src in LAYER and LAYER[dst] > LAYER[src]:
                wrong.append(f"{f.relative_to(ROOT)} ({src}, layer {LAYER[src]}) imports {mod} "
                             f"({dst}, layer {LAYER[dst]})")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_every_unit_has_a_layer() -> None:
    files = [f for d in STAGE_DIRS + ("ascendsched",) for f in (ROOT / d).rglob("*.py")]
    units = {_unit_of_file(f) for f in files} - {"__init__"}
    assert units <= set(LAYER), sorted(units - set(LAYER))
