"""Lifetimes and memory planning across mutually exclusive branches (the full-tile and
tail-tile versions of one loop body, as a fused bound loop with tails makes them): per-branch live segments, shared UB, and the syncs the
sharing needs (race checker on the simulator's trace)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ascendsched.algo import library as L
from ascendsched.dtypes import float32
from ascendsched.errors import CapacityError
from ascendsched.lower.insert_sync import insert_sync
from ascendsched.lower.ir import (
    Affine,
    Buffer,
    Cond,
    For,
    GmTensor,
    If,
    Instr,
    Kernel,
    Program,
    view,
)
from ascendsched.lower.lifetimes import buffer_lifetimes
from ascendsched.lower.plan_memory import plan_memory
from ascendsched.lower.polyhedral import analyze_dependences
from ascendsched.schedule import Schedule
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.target import ASCEND_910B, CoreType, Pipe, Scope, Target
from tests.kit.ir import memory_plan, planned

TILE = 1024  # float32 elements of every buffer: 4096 B
T = "t"
FULL = 4  # full tiles; tile FULL is the (half-size) tail


def _exp(dst: str, src: str, n: int) -> Instr:
    return Instr("vec_unary", Pipe.V, (view(dst, 0, n // 64, 64, 64),),
                 (view(src, 0, n // 64, 64, 64),), (("fn", "exp"),), comment=f"{dst} = exp({src})")


def _version(n: int, tmp: str) -> tuple[Instr, ...]:
    """load x_ub; tmp = exp(x_ub); c_ub = exp(tmp); store c_ub -- over ``n`` elements."""
    gm = Affine.of(T) * TILE
    return (Instr("copy_gm_ub", Pipe.MTE2, (view("x_ub", 0, 1, n, n),), (view("x", gm, 1, n, n),)),
            _exp(tmp, "x_ub", n), _exp("c_ub", tmp, n),
            Instr("copy_ub_gm", Pipe.MTE3, (view("y", gm, 1, n, n),), (view("c_ub", 0, 1, n, n),)))


TAIL = Cond(Affine.of(T), "==", FULL)


def _tail_kernel(tail_cond: Cond = TAIL) -> Kernel:
    """for t in 0..5: if t < 4: <full tile, temporary a_ub> / if <tail_cond>: <half tile,
    temporary b_ub>. Positions: 0 load x, 1 a = exp x, 2 c = exp a, 3 store c | 4 load x,
    5 b = exp x, 6 c = exp b, 7 store c."""
    n = FULL * TILE + TILE // 2
    body = (If((Cond(Affine.of(T), "<", FULL),), _version(TILE, "a_ub"), "full tile"),
            If((tail_cond,), _version(TILE // 2, "b_ub"), "tail tile"))
    return Kernel.build(
        "tail", (GmTensor("x", (n,), float32), GmTensor("y", (n,), float32, "output")),
        tuple(Buffer(b, Scope.UB, float32, TILE) for b in ("x_ub", "a_ub", "b_ub", "c_ub")), 1,
        (Program(CoreType.AIV, (For(T, FULL + 1, body),)),), ASCEND_910B)


def test_buffers_of_exclusive_branches_live_per_branch() -> None:
    lt = buffer_lifetimes(_tail_kernel())
    spans = {e.buffer: e.spans for e in lt.entries}
    assert spans == {"x_ub": ((0, 1), (4, 5)), "a_ub": ((1, 2),), "b_ub": ((5, 6),),
                     "c_ub": ((2, 3), (6, 7))}
    assert not lt.of("x_ub").overlaps(lt.of("c_ub"))  # their hulls [0, 5] and [2, 7] do
    assert [e.buffer for e in lt.live_at(5)] == ["x_ub", "b_ub"]


def _with_ub(usable: int) -> Target:
    ub = ASCEND_910B.scope(Scope.UB)
    return replace(ASCEND_910B, scopes=tuple(replace(s, usable=usable) if s is ub else s
                                             for s in ASCEND_910B.scopes))


def test_the_tail_version_reuses_the_full_versions_bytes() -> None:
    k = _tail_kernel()
    plan = plan_memory(k, buffer_lifetimes(k), ASCEND_910B)
    offs = {b: plan.offsets(b)[0] for b in ("x_ub", "a_ub", "b_ub", "c_ub")}
    # the tail's temporary takes the full tile's; x_ub and c_ub stay apart while UB has
    # room (sharing would make the next tile's load wait for this tile's store)
    assert offs["a_ub"] == offs["b_ub"] and len({offs["a_ub"], offs["x_ub"], offs["c_ub"]}) == 3
    assert plan.peak(Scope.UB) == 3 * 4096 and not plan.compromises
    assert "[0, 1] [4, 5]" in str(plan)
    # with room for two tiles only: at most two live at once in either branch, two slots
    tight = plan_memory(k, buffer_lifetimes(k), _with_ub(2 * 4096))
    assert tight.peak(Scope.UB) == 2 * 4096 and not tight.compromises
    offs = {b: tight.offsets(b)[0] for b in ("x_ub", "a_ub", "b_ub", "c_ub")}
    assert offs["x_ub"] == offs["c_ub"] and offs["a_ub"] == offs["b_ub"] != offs["x_ub"]


def test_sibling_ifs_that_may_both_run_are_not_split() -> None:
    # t < 4 and t >= 3 both hold at t == 3: the old whole-interval lifetimes, three slots
    k = _tail_kernel(Cond(Affine.of(T), ">=", FULL - 1))
    lt = buffer_lifetimes(k)
    assert lt.of("x_ub").spans == ((0, 5),) and lt.of("c_ub").spans == ((2, 7),)
    assert plan_memory(k, lt, ASCEND_910B).peak(Scope.UB) == 3 * 4096


def test_a_value_handed_from_one_branch_to_the_next_iteration_lives_over_the_whole_loop() -> None:
    # the tail version reads a_ub before writing anything: the full tile of an earlier
    # iteration made it, so a_ub must survive the whole loop, every branch included
    k = _tail_kernel()
    loop = k.programs[0].body[0]
    full, tail = loop.body
    tail = If(tail.conds, (_exp("b_ub", "a_ub", TILE // 2),) + tail.body[1:], tail.comment)
    k2 = Kernel.build(k.name, k.params, k.buffers, 1,
                (Program(CoreType.AIV, (For(T, loop.extent, (full, tail)),)),), k.target)
    lt = buffer_lifetimes(k2)
    assert lt.of("a_ub").spans == ((0, 7),) and "carried by loop t" in lt.of("a_ub").why
    plan = plan_memory(k2, lt, ASCEND_910B)
    a = plan.offsets("a_ub")[0]
    assert all(plan.offsets(b)[0] != a for b in ("x_ub", "b_ub", "c_ub"))


def test_too_many_paths_fall_back_to_whole_loops(monkeypatch) -> None:
    monkeypatch.setattr("ascendsched.lower.lifetimes._MAX_PATHS", 1)
    lt = buffer_lifetimes(_tail_kernel())
    assert {e.buffer: e.spans for e in lt.entries} == {b: ((0, 7),) for b in
                                                        ("x_ub", "a_ub", "b_ub", "c_ub")}
    assert "groups of exclusive branches: whole loops" in lt.of("b_ub").why


def test_shared_bytes_between_branches_get_their_syncs() -> None:
    k = _tail_kernel()
    k = planned(k, ASCEND_910B)
    k = insert_sync(k, analyze_dependences(k), ASCEND_910B)
    x = np.random.default_rng(0).uniform(-1, 1, FULL * TILE + TILE // 2).astype(np.float32)
    res = run_kernel(k, {"x": x}, trace=True)
    np.testing.assert_allclose(res.outputs["y"], np.exp(np.exp(x)), rtol=1e-6)
    report = check_trace(res.trace, ASCEND_910B)
    assert report.ok, str(report)


# --------------------------------------------------------------------------- softmax 9 x 6144
def _softmax_rows(m: int, cores: int = 4, copies: int = 1) -> Schedule:
    s = Schedule(L.softmax(m, 6144)).split("y", "i", 2).bind("y", "i_o", cores=cores)
    for st in ("xf", "mx", "e", "s"):
        s = s.compute_at(st, "y", "i_o")
    return s.buffer("x", copies=copies).buffer("y", copies=copies) if copies > 1 else s


def test_bound_softmax_with_a_tail_tile_fits_like_without_one() -> None:
    # 9 rows in 2-row tiles over 4 cores: the tail tile is peeled after the persistent loop
    # (build_loop_nest ``_peeled_tail``) with buffers of its own, which reuse the loop's
    # bytes: the peak is that of 8 rows, 105248 B with x_ub and y_ub apart from the
    # temporaries (the loads and stores of neighbouring tiles overlap the vector work),
    # 73760 B when UB is short and they share bytes. (As a second version inside the loop,
    # before per-branch lifetimes, it needed 196704 B: a CapacityError.)
    lt, plan = memory_plan(_softmax_rows(9))
    assert plan.peak(Scope.UB) == memory_plan(_softmax_rows(8))[1].peak(Scope.UB) == 105248
    for rows in (8, 9):
        tight = memory_plan(_softmax_rows(rows), _with_ub(80000))[1]
        assert tight.peak(Scope.UB) == 73760 and not tight.compromises
    assert not plan.compromises
    assert len(lt.of("xf_ub").spans) == len(lt.of("xf_ub_tail").spans) == 1


def _bias_rows(m: int, cores: int = 4) -> Schedule:
    """bias_add tiled 2 rows x 4096 columns, both tile loops fused and bound: with an odd
    ``m`` the tail rows are a second version of the body, a branch inside the loop."""
    return (Schedule(L.bias_add(m, 8192)).split("y", "i", 2).split("y", "j", 4096)
            .fuse("y", "i_o", "j_o").bind("y", "i_o_j_o", cores))


def test_a_tail_version_inside_a_fused_bound_loop_fits_like_without_one() -> None:
    # the two versions' buffers live once per branch and share bytes
    lt, plan = memory_plan(_bias_rows(9))
    assert plan.peak(Scope.UB) == memory_plan(_bias_rows(8))[1].peak(Scope.UB)
    assert not plan.compromises
    assert all(len(lt.of(b).spans) == 2 for b in ("x_ub", "y_ub"))


def test_a_tail_version_inside_a_fused_bound_loop_passes_the_ir_rungs() -> None:
    from ascendsched.api.check import check

    vs = check(_bias_rows(9, cores=3), cpp=False)
    assert [v.check for v in vs] == ["lower", "IR execution == numpy (y)", "IR trace race check"]
    assert all(v.ok for v in vs), "\n".join(map(str, vs))


def test_bound_softmax_with_a_tail_tile_double_buffered_fits() -> None:
    _, plan = memory_plan(_softmax_rows(9, copies=2))
    assert plan.peak(Scope.UB) <= ASCEND_910B.scope(Scope.UB).usable and not plan.compromises


def test_bound_softmax_with_a_tail_passes_the_ir_rungs() -> None:
    from ascendsched.api.check import check

    vs = check(_softmax_rows(9), cpp=False)
    assert [v.check for v in vs] == ["lower", "IR execution == numpy (y)", "IR trace race check"]
    assert all(v.ok for v in vs), "\n".join(map(str, vs))


def test_a_tile_too_big_for_either_branch_still_overflows() -> None:
    with pytest.raises(CapacityError, match="UB buffers need"):
        memory_plan(Schedule(L.softmax(9, 6144)).split("y", "i", 6).bind("y", "i_o", cores=2)
              .compute_at("xf", "y", "i_o").compute_at("mx", "y", "i_o")
              .compute_at("e", "y", "i_o").compute_at("s", "y", "i_o"))
