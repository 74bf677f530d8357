"""Lifetimes, memory planning and applying the plan."""

from __future__ import annotations

import pytest

from ascendsched.errors import CapacityError
from ascendsched.lower.apply_memory_plan import apply_memory_plan
from ascendsched.lower.ir import Buffer, For, Instr, Kernel, Program, view
from ascendsched.lower.lifetimes import buffer_lifetimes
from ascendsched.lower.plan_memory import plan_memory
from ascendsched.target import ASCEND_910B, CoreType, Pipe, Scope
from tests.ir_fixtures import row_max_sub_kernel, vadd_kernel


def _spans(k: Kernel) -> dict[tuple[str, int], tuple[int | None, int | None]]:
    return {(e.buffer, e.copy): (e.start, e.end) for e in buffer_lifetimes(k).entries}


def test_vadd_lifetimes_are_per_iteration() -> None:
    # S0 load x, S1 load y, S2 add, S3 store: nothing is carried across k
    assert _spans(vadd_kernel(copies=2)) == {
        ("x_ub", 0): (0, 2), ("x_ub", 1): (0, 2), ("y_ub", 0): (1, 2), ("y_ub", 1): (1, 2),
        ("z_ub", 0): (2, 3), ("z_ub", 1): (2, 3)}


def test_loop_widening() -> None:
    k = row_max_sub_kernel()
    f32 = k.buffer_map["x_ub"].dtype
    dup = Instr("vec_dup", Pipe.V, (view("m_ub", 0, 1, 8, 8),), (), (("value", 0.0),))
    load = Instr("copy_gm_ub", Pipe.MTE2, (view("x_ub", 0, 16, 64, 64),),
                 (view("x", 0, 16, 64, 64),))
    acc = Instr("vec_binary", Pipe.V, (view("m_ub", 0, 1, 8, 8),),
                (view("m_ub", 0, 1, 8, 8), view("x_ub", 0, 1, 8, 8)), (("fn", "add"),))
    tmp_w = Instr("vec_dup", Pipe.V, (view("mb_ub", 0, 1, 8, 8),), (), (("value", 1.0),))
    tmp_r = Instr("vec_binary", Pipe.V, (view("y_ub", 0, 1, 8, 8),),
                  (view("mb_ub", 0, 1, 8, 8), view("mb_ub", 0, 1, 8, 8)), (("fn", "add"),))
    store = Instr("copy_ub_gm", Pipe.MTE3, (view("y", 0, 1, 8, 8),), (view("m_ub", 0, 1, 8, 8),))
    body = (tmp_w, For("k", 4, (load, acc, tmp_r)), store)
    k2 = Kernel(k.name, k.params, k.buffers + (Buffer("u_ub", Scope.UB, f32, 8),), 1,
                (Program(CoreType.AIV, (dup,) + body),), k.target)
    spans = _spans(k2)
    # positions: 0 dup m, 1 dup mb, [2 load x, 3 acc m, 4 y = mb + mb], 5 store m
    assert spans[("m_ub", 0)] == (0, 5)  # defined before, carried through k, read after
    assert spans[("mb_ub", 0)] == (1, 4)  # defined before the loop, read in it: to its end
    assert spans[("x_ub", 0)] == (2, 3)
    assert spans[("u_ub", 0)] == (None, None)
    plan = plan_memory(k2, buffer_lifetimes(k2), ASCEND_910B)
    assert plan.offsets("u_ub") == (0,)


def test_row_max_sub_reuses_dead_space_on_one_pipe() -> None:
    k = row_max_sub_kernel()
    plan = plan_memory(k, buffer_lifetimes(k), ASCEND_910B)
    text = str(plan)
    assert "peak 4672 B" in text and "without reuse 8768 B" in text
    # y = x - m writes y_ub over exactly the elements of x_ub it reads: y_ub takes x_ub's
    # bytes (in place), and that is no cross-pipe reuse
    assert ("x_ub", "y_ub") in buffer_lifetimes(k).in_place
    assert plan.offsets("y_ub") == plan.offsets("x_ub")
    assert plan.usage[0].cross_pipe_reuses == 0
    assert plan.peak(Scope.UB) == 4672 and plan.total(Scope.UB) == 8768


def test_alignment_is_respected() -> None:
    k = vadd_kernel(copies=2)
    f16 = k.buffer_map["x_ub"].dtype
    odd = Buffer("odd_ub", Scope.UB, f16, 7)  # 14 bytes -> one 32-byte slot
    ins = Instr("vec_dup", Pipe.V, (view("odd_ub", 0, 1, 7, 7),), (), (("value", 0.0),))
    body = k.programs[0].body[0]
    k2 = Kernel(k.name, k.params, (odd,) + k.buffers, 1,
                (Program(CoreType.AIV, (For(body.var, body.extent, (ins,) + body.body),)),),
                k.target)
    plan = plan_memory(k2, buffer_lifetimes(k2), ASCEND_910B)
    for p in plan.placements:
        assert p.offset % 32 == 0 and p.size % 32 == 0
    applied = apply_memory_plan(k2, plan)
    assert applied.buffer_map["odd_ub"].offsets is not None
    assert apply_memory_plan(applied, plan) is applied  # unchanged -> same object


def test_double_buffer_copies_are_distinct() -> None:
    k = vadd_kernel(copies=2)
    plan = plan_memory(k, buffer_lifetimes(k), ASCEND_910B)
    k2 = apply_memory_plan(k, plan)
    offs = [o for b in k2.buffers for o in b.offsets]
    assert len(set(offs)) == 6 and plan.peak(Scope.UB) == 6 * 4096


def test_capacity_error_names_buffers_and_fixes() -> None:
    k = vadd_kernel(n=65536 * 4, tile=32768, copies=2)  # 6 x 64 KB > 184 KB
    with pytest.raises(CapacityError, match="x_ub: 2 copies x 65536 B") as err:
        plan_memory(k, buffer_lifetimes(k), ASCEND_910B)
    msg = str(err.value)
    for text in ("y_ub", "z_ub", "188160 B usable", "copies=1 on x_ub", "a smaller tile"):
        assert text in msg
