"""The code a fused tile loop's full and tail versions of its last axis share runs once
(``lower/shared_versions.py``): fewer statements, the same results, no race, and tiles whose
row statistics no longer overlap the next tile's loads in UB fit."""

from __future__ import annotations

import pytest

from ascendsched.algo import library as L
from ascendsched.errors import BufferingWarning
from ascendsched.lower.affine import Affine
from ascendsched.lower.build_loop_nest import build_loop_nest
from ascendsched.lower.ir import For, If, Instr, Kernel, iter_instrs, view
from ascendsched.lower.pipeline import lower
from ascendsched.lower.shared_versions import _hoisted, _same
from ascendsched.schedule import Schedule
from ascendsched.target import Pipe


def _fused_rms(width: int, j: int) -> Schedule:
    """RMSNorm 20 x ``width`` in fused tiles of 8 rows x ``j`` columns on 3 cores, its row
    statistic reduced per tile over chunks of 384 columns (rows and chunks have tails)."""
    return (Schedule(L.rmsnorm(20, width)).split("y", "i", 8).split("y", "j", j)
            .fuse("y", "i_o", "j_o").bind("y", "i_o_j_o", cores=3).compute_inline("xf")
            .compute_at("ss", "y", "i_o_j_o").split("ss", "k", 384)
            .compute_at("r", "y", "i_o_j_o").buffer("x", 2))


def _of(k: Kernel, stage: str) -> list[Instr]:
    return [i for p in k.programs for i, _ in iter_instrs(p.body)
            if i.comment.startswith(f"{stage}:")]


def test_a_row_statistic_of_fused_tiles_is_generated_once_per_row_version() -> None:
    # columns in 400-wide tiles (a 160-column tail) or 480-wide ones (none): the statistic
    # reads whole rows either way, so its code is the same and appears once per row version
    with_tail, without = build_loop_nest(_fused_rms(960, 400)), \
        build_loop_nest(_fused_rms(960, 480))
    assert len(_of(with_tail, "ss")) == len(_of(without, "ss")) > 0
    # while the output's code differs per column version: more instructions with the tail
    assert len(_of(with_tail, "y")) > len(_of(without, "y"))
    # the shared code sits under the row guard, before the column guards
    loop = with_tail.programs[0].body[0]  # 9 tiles on 3 cores: no last-tile guard
    row_full = loop.body[0]
    assert isinstance(loop, For) and isinstance(row_full, If)
    assert row_full.comment == "i: full tile"
    assert [s.comment for s in row_full.body if isinstance(s, If)] == \
        ["j: full tile", "j: tail tile"]


def test_fused_tiles_with_a_shared_statistic_pass_the_ir_rungs() -> None:
    from ascendsched.api.check import check

    vs = check(_fused_rms(1000, 400), cpp=False)
    assert [v.check for v in vs] == ["lower", "IR execution == numpy (y)", "IR trace race check"]
    assert all(v.ok for v in vs), "\n".join(map(str, vs))


@pytest.mark.slow
def test_fused_softmax_tiles_with_shared_online_statistics_pass_every_rung() -> None:
    from ascendsched.api.check import check

    s = (Schedule(L.softmax(20, 1000)).split("y", "i", 8).split("y", "j", 256)
         .fuse("y", "i_o", "j_o").bind("y", "i_o_j_o", cores=4).compute_inline("xf")
         .compute_at("mx", "y", "i_o_j_o").split("mx", "k", 256).compute_inline("e")
         .compute_at("s", "y", "i_o_j_o").split("s", "k2", 256).online("s", "mx")
         .buffer("y", 2))
    vs = check(s)
    assert all(v.ok for v in vs), "\n".join(map(str, vs))


def test_a_tile_whose_statistic_overlapped_its_loads_in_ub_now_fits() -> None:
    # softmax 100 x 3000 in fused 64 x 256 tiles: each version loaded its x tile before the
    # row statistics, which read the rows again in chunks; with the loads of the column
    # versions after the shared statistics, their buffers are not live together. Before:
    # CapacityError even with every compromise (297 536 B of UB needed, 188 160 B usable);
    # now it fits with y's two copies sharing bytes with temporaries (a warning says so)
    s = (Schedule(L.softmax(100, 3000)).split("y", "i", 64).split("y", "j", 256)
         .fuse("y", "i_o", "j_o").bind("y", "i_o_j_o", cores=24).compute_inline("xf")
         .compute_at("mx", "y", "i_o_j_o").split("mx", "k", 256).compute_inline("e")
         .compute_at("s", "y", "i_o_j_o").split("s", "k2", 256).buffer("y", 2))
    with pytest.warns(BufferingWarning, match="copies of y_ub share bytes"):
        assert lower(s).name == "softmax"


def _copy(dst: str, src: str, off: int = 0) -> Instr:
    return Instr("vec_copy", Pipe.V, (view(dst, 0, 1, 64, 64),), (view(src, off, 1, 64, 64),))


def test_shared_statements_move_only_past_what_they_do_not_touch() -> None:
    load_f = Instr("copy_gm_ub", Pipe.MTE2, (view("a", 0, 1, 64, 64),), (view("x", 0, 1, 64, 64),))
    load_t = Instr("copy_gm_ub", Pipe.MTE2, (view("a", 0, 1, 32, 32),), (view("x", 64, 1, 32, 32),))
    reads_a, other = _copy("b", "a"), _copy("d", "c")
    common, rest_f, rest_t = _hoisted([load_f, reads_a, other], [load_t, reads_a, other])
    # b = a reads what each version's load writes first: it stays behind the loads
    assert common == [other]
    assert rest_f == [load_f, reads_a] and rest_t == [load_t, reads_a]


def test_loops_compare_up_to_their_own_names() -> None:
    def loop(var: str, extent: int) -> For:
        return For(var, extent, (Instr("vec_copy", Pipe.V, (view("b", Affine.of(var) * 64, 1,
                                                                   64, 64),),
                                       (view("a", 0, 1, 64, 64),)),))

    assert _same(loop("p1", 4), loop("p7", 4), {})
    assert not _same(loop("p1", 4), loop("p7", 3), {})
