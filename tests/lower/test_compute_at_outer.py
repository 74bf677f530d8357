"""compute_at at an outer tile loop: a stage computed once per iteration of that loop, over the
box every tile inside reads (a LayerNorm row's statistics once per row, its pieces tiles of the
loop inside), checked against numpy and the race checker with tails in both loops."""

from __future__ import annotations

import pytest

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.errors import ScheduleError
from ascendsched.lower.ir import For, iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule

STATS = ("xf", "d", "var", "r")


def _layernorm(rows: int, cols: int, tile_rows: int, piece: int, cores: int,
               outer: tuple[str, ...]) -> Schedule:
    """Row tiles bound to cores, each row cut into pieces (the inner tile loop); the stages
    of ``outer`` computed once per row tile, the others inlined into the pieces."""
    algo = L.layernorm(rows, cols)
    s = (Schedule(algo).split("y", "j", piece).split("y", "i", tile_rows)
         .reorder("y", "i_o", "j_o").bind("y", "i_o", cores))
    for st in algo.stages:
        if st not in algo.outputs:
            s = s.compute_at(st.name, "y", "i_o") if st.name in outer else \
                s.compute_inline(st.name)
    return s


@pytest.mark.parametrize("shape", [
    (50, 3000, 3, 1024, 4, STATS),       # a row tail (50 % 3) and a piece tail (3000 % 1024)
    (50, 3000, 3, 1024, 4, ("xf", "d")),  # the variance inlined into every piece
    (37, 2512, 2, 1024, 5, STATS),
])
def test_stages_computed_once_per_row_tile_match_numpy(shape) -> None:  # noqa: ANN001
    verdicts = check(_layernorm(*shape), cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_the_statistics_sit_outside_the_piece_loop() -> None:
    k = lower(_layernorm(50, 3000, 3, 1024, 4, STATS))
    body = k.programs[0].body

    def loops_around(op_comment: str) -> list[list[str]]:
        out = []

        def walk(stmts, loops):  # noqa: ANN001, ANN202
            for s in stmts:
                if isinstance(s, For):
                    walk(s.body, loops + [s.var])
                elif hasattr(s, "body"):
                    walk(s.body, loops)
                elif getattr(s, "comment", "").startswith(op_comment):
                    out.append(loops)
        walk(body, [])
        return out

    assert any(True for _ in iter_instrs(body))
    # the cast to float32, the mean's and the variance's reductions and rsqrt: per row tile
    # only; the output cast per piece (inside j_o, and once more for the tail piece)
    for op in ("xf: cast", "d: sum over k", "var: sum over k2", "r: rsqrt"):
        where = loops_around(op)
        assert where and all("j_o" not in ls for ls in where), (op, where)
    where = loops_around("y: cast")
    assert any("j_o" in ls for ls in where) and any("j_o" not in ls for ls in where), where


def test_a_stage_outside_cannot_read_one_computed_inside() -> None:
    algo = L.layernorm(50, 3000)
    s = (Schedule(algo).split("y", "j", 1024).split("y", "i", 2).reorder("y", "i_o", "j_o")
         .bind("y", "i_o", 4).compute_at("xf", "y", "j_o").compute_inline("mean")
         .compute_at("d", "y", "i_o").compute_inline("var").compute_inline("r"))
    with pytest.raises(ScheduleError, match=r"'d' reads 'xf', which is computed inside"):
        lower(s)


def test_compute_at_names_every_tile_loop_when_the_loop_is_not_one() -> None:
    algo = L.layernorm(50, 3000)
    s = Schedule(algo).split("y", "j", 1024).split("y", "i", 2).reorder("y", "i_o", "j_o")
    assert s.legal_compute_at("y") == ["j_o", "i_o"]  # the innermost (per tile) first
    with pytest.raises(ScheduleError, match=r"compute_at\('xf', 'y', 'j_o'\), compute_at\("):
        s.compute_at("xf", "y", "k_o")


@pytest.mark.slow
def test_stages_computed_once_per_row_tile_through_the_cpp_ladder() -> None:
    verdicts = check(_layernorm(50, 3000, 3, 1024, 4, STATS))
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
