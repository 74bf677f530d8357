"""The tail tile of a bound loop over one axis, peeled after the persistent loop
(``build_loop_nest._peeled_tail``): structure, the overlap it keeps, and the ladder."""

from __future__ import annotations

import warnings

from ascendsched.algo import library as L
from ascendsched.lower.ir import For, If, Instr, iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.lower.sync_ir import SetFlag
from ascendsched.schedule import Schedule
from ascendsched.sim.timing import model_time
from ascendsched.target import Pipe


def _layernorm(m: int, n: int = 4096, cores: int = 8, rows: int = 3, copies: int = 1
               ) -> Schedule:
    """LayerNorm in ``rows``-row tiles, statistics per tile, x and y with ``copies``."""
    s = (Schedule(L.layernorm(m, n)).split("y", "i", rows).bind("y", "i_o", cores=cores)
         .compute_at("xf", "y", "i_o").compute_inline("mean").compute_at("d", "y", "i_o")
         .compute_inline("var").compute_inline("r").load_once("beta").load_once("gamma"))
    return s.buffer("x", copies=copies).buffer("y", copies=copies)


def test_the_tail_runs_after_the_loop_on_the_core_that_owns_it() -> None:
    # 97 rows in 3-row tiles: 32 full tiles over 8 cores, then tile 32 (1 row) on core 0
    k = lower(_layernorm(97, 64, copies=2))
    body = k.programs[0].body
    loop = next(s for s in body if isinstance(s, For))
    tail = body[body.index(loop) + 1:]
    assert loop.extent == 4 and not any(isinstance(s, If) for s in loop.body)  # no guard
    guard = next(s for s in tail if isinstance(s, If))
    assert str(guard.conds[0]) == "block_idx == 0"
    loads = [i for i, _ in iter_instrs(guard.body) if i.op == "copy_gm_ub"]
    # the double-buffered tile keeps the loop's buffer, in the copy the loop would use next
    # (tile 32 is iteration 4 of core 0: copy 0); a one-copy temporary has its own
    assert [(r.tensor, str(r.copy)) for i in loads for r in i.writes] == [("x_ub", "0")]
    names = {r.tensor for i, _ in iter_instrs(guard.body) for r in i.writes}
    assert "xf_ub_tail" in names and "xf_ub" not in names


def test_the_slot_free_set_follows_the_last_read_in_the_loop() -> None:
    """With the tail a branch inside the loop, the one-copy x_ub's V -> MTE2 set came after
    the whole tile (after both branches), so the next load waited for every vector
    instruction; peeled, it follows the cast, the tile's only reader of x_ub."""
    k = lower(_layernorm(97, 64))
    loop = next(s for s in k.programs[0].body if isinstance(s, For))
    assert not any(isinstance(s, If) for s in loop.body)  # one version, no guard
    stmts = list(loop.body)
    cast = next(j for j, s in enumerate(stmts) if isinstance(s, Instr) and s.op == "vec_cast")
    assert any(r.tensor == "x_ub" for r in stmts[cast].reads)
    after = stmts[cast + 1]
    assert isinstance(after, SetFlag) and (after.src, after.dst) == (Pipe.V, Pipe.MTE2)


def test_a_tail_tile_costs_less_than_one_more_full_tile() -> None:
    # core 0 runs 4 full tiles and the 1-row tail (97 rows) or 5 full tiles (99 rows); with the
    # tail a branch in the loop the first took longer: 18.01 against 17.10 us modelled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tail, more = (model_time(lower(_layernorm(m))).time_s for m in (97, 99))
    assert tail < more


def test_peeled_tails_pass_the_ir_rungs() -> None:
    from ascendsched.api.check import check

    for sched in (_layernorm(7, 64, cores=2), _layernorm(11, 64, cores=2, rows=2, copies=2),
                  _layernorm(5, 64, cores=2)):  # the last: one full tile, the tail on core 1
        vs = check(sched, cpp=False)
        assert all(v.ok for v in vs), "\n".join(map(str, vs))
