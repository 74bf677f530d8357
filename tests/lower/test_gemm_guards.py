"""The guard of a GEMM tile class that runs one trip: the interval of cores that have a tile,
said as such (``block_idx == 18``), never the tile-number arithmetic it comes from."""

from __future__ import annotations

from ascendsched.algo.library import gemm
from ascendsched.lower.affine import Affine
from ascendsched.lower.build_gemm import build_gemm, class_runs
from ascendsched.lower.ir import BLOCK_IDX, If
from ascendsched.schedule.gemm import GemmSchedule


def _guards(body: tuple) -> list[If]:
    out = []
    for s in body:
        if isinstance(s, If):
            out.append(s)
        if hasattr(s, "body"):
            out += _guards(s.body)
    return out


def test_one_trip_class_guards_name_the_cores_that_have_a_tile() -> None:
    """300 x 200 x 150 in 16 x 208 tiles on 19 cores: 18 N-edge tiles on cores 0-17 and the
    corner on core 18, numbered after them (its first tile is ``(block_idx + 1) mod 19``)."""
    s = (GemmSchedule(gemm(300, 200, 150)).tile(16, 208, 32).split_k(32).buffer("l1", 2)
         .bind(19))
    plan = s.plan
    guards = _guards(build_gemm(plan).programs[0].body)
    runs = [r for r in class_runs(plan) if r.guarded and r.var is None]
    assert len(guards) == len(runs) == 2
    texts = []
    for g, r in zip(guards, runs, strict=True):
        assert all(c.lhs == Affine.of(BLOCK_IDX) for c in g.conds)
        cores = {b for b in range(19) if all(c.evaluate({BLOCK_IDX: b}) for c in g.conds)}
        assert cores == {b for b in range(19) if r.first.evaluate({BLOCK_IDX: b}) < r.count}
        texts.append(" and ".join(map(str, g.conds)))
    assert texts == ["block_idx < 18", "block_idx == 18"]
