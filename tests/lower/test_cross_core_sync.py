"""Mixed kernels (GEMM + Vector epilogue): the cross-core channels derived from the workspace
dependences, where their flags go, the intra-core syncs they make unnecessary, the IR rungs of
the ladder (tails in M, N and K, default and hand schedules) and a mutation test: without any
one derived flag the simulator deadlocks or the trace checker reports a race."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ascendsched.algo import algorithm, compute, placeholder, reduce_axis, reduce_sum
from ascendsched.algo.library import (
    batched_gemm_row_scale,
    gemm_bias_gelu,
    gemm_gelu,
    gemm_row_scale,
    gemm_softmax,
)
from ascendsched.algo.ops import exp, relu
from ascendsched.api.check import check
from ascendsched.api.numerics import random_inputs, vector_epilogue_error
from ascendsched.api.sync_minimality import sync_minimality
from ascendsched.errors import InternalCompilerError
from ascendsched.lower.cross_core_sync import insert_cross_sync, leave_to_cross, plan_cross_sync
from ascendsched.lower.ir import For, If, iter_instrs
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import lower
from ascendsched.lower.sync_ir import Barrier, CrossSet, CrossWait, Sync
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.sim.checker import check_trace
from ascendsched.sim.execute import run_kernel
from ascendsched.target import CoreType, Pipe

GELU = (GemmSchedule(gemm_gelu(33, 47, 70)).tile(32, 32, 32).split_k(16).buffer("l0", 2)
        .epilogue_on("vector", rows=8))
SCALE = (GemmSchedule(gemm_row_scale(100, 130, 90)).tile(32, 64, 32).bind(3)
         .swizzle(2, "m").buffer("workspace", 3))
# the bias added by Mmad from the bias table, GELU on the Vector cores (a split epilogue)
BIAS_GELU = (GemmSchedule(gemm_bias_gelu(100, 130, 90)).epilogue_on("vector", after="D")
             .tile(32, 64, 32).bind(3).buffer("workspace", 3))


@functools.lru_cache(maxsize=8)
def _lowered(sched):  # noqa: ANN001, ANN202 -- lowering a mixed kernel takes seconds: once
    log = PassLog()
    return lower(sched, log=log), log


def _cross(k, core):  # noqa: ANN001, ANN202
    return [i for i, _ in iter_instrs(k.program(core).body) if isinstance(i, (CrossSet, CrossWait))]


def test_two_channels_derived_from_the_workspace_dependences() -> None:
    k, log = _lowered(GELU)
    assert str(log.results["cross-core plan"]) == (
        "cross-core channels of gemm_gelu: 2\n"
        "  cross flag 0: AIC FIX -> AIV MTE2, distance 0: C_ws: AIC FIX fixpipe -> AIV MTE2 "
        "copy_gm_ub (RAW)\n"
        "  cross flag 1: AIV MTE2 -> AIC FIX, distance 2: C_ws: AIV MTE2 copy_gm_ub -> AIC FIX "
        "fixpipe (WAR)")
    # per tile loop: the AIC waits for a free slot right before its Fixpipe and signals after
    # it; the AIV waits before the tile and frees the slot after it; 2 initial free slots
    aic, aiv = _cross(k, CoreType.AIC), _cross(k, CoreType.AIV)
    loops = 4  # tile classes of 33 x 47 by 32 x 32: interior, M edge, N edge, corner
    assert [(type(i).__name__, i.pipe, i.flag_id.const) for i in aic] == \
        [("CrossWait", Pipe.FIX, 1), ("CrossSet", Pipe.FIX, 0)] * loops + \
        [("CrossWait", Pipe.FIX, 1)] * 2
    assert [(type(i).__name__, i.pipe, i.flag_id.const) for i in aiv] == \
        [("CrossSet", Pipe.MTE2, 1)] * 2 + \
        [("CrossWait", Pipe.MTE2, 0), ("CrossSet", Pipe.MTE2, 1)] * loops
    assert aic[0].comment == ("slot free, from both AIVs (of 2 tiles back): C_ws: AIV MTE2 "
                              "copy_gm_ub -> AIC "
                              "FIX fixpipe (WAR)")
    body = next(s for s in k.program(CoreType.AIC).body if isinstance(s, For)).body
    fix = next(n for n, s in enumerate(body) if getattr(s, "op", "") == "fixpipe")
    wait = max(n for n, s in enumerate(body[:fix]) if isinstance(s, CrossWait))
    assert all(isinstance(s, Sync) for s in body[wait:fix])  # only the M -> FIX flag between
    assert isinstance(body[fix + 1], CrossSet)


def test_the_slot_rewrite_is_ordered_by_the_flags_not_by_a_fixpipe_barrier() -> None:
    k, log = _lowered(GELU)
    deps = log.results["dependences"]
    waw = [d for d in deps if d.space == "C_ws" and str(d.kind) == "WAW"]
    assert waw and all(d.src_pipe == d.dst_pipe == Pipe.FIX for d in waw)
    assert not any(isinstance(i, Barrier) and i.pipe == Pipe.FIX
                   for i, _ in iter_instrs(k.program(CoreType.AIC).body))


@pytest.mark.parametrize("copies", [1, 3])
def test_the_slot_free_channel_starts_with_one_set_per_slot(copies: int) -> None:
    sched = GemmSchedule(gemm_row_scale(64, 64, 32)).tile(16, 64, 32).buffer("workspace", copies)
    plan = _lowered(sched)[1].results["cross-core plan"]
    assert [c.distance for c in plan.channels] == [0, copies]


def test_no_slot_free_flag_when_no_block_reuses_a_slot() -> None:
    """21 cores, 2 slots: each block runs at most one tile of the classes that share a slot,
    so the exact analysis finds no WAR on the workspace."""
    k, log = _lowered(GemmSchedule(gemm_row_scale(100, 130, 90)).tile(16, 64, 32).bind(21))
    plan = log.results["cross-core plan"]
    assert [(c.src_core, c.distance) for c in plan.channels] == [(CoreType.AIC, 0)]


@pytest.mark.parametrize("sched", [
    GELU, SCALE, gemm_gelu(33, 47, 70), gemm_row_scale(100, 130, 90)],
    ids=["gelu_hand", "row_scale_hand", "gelu_default", "row_scale_default"])
def test_ir_rungs_of_the_ladder(sched) -> None:  # noqa: ANN001
    k = _lowered(sched)[0] if isinstance(sched, GemmSchedule) else None
    verdicts = check(sched, cpp=False, kernel=k)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
    assert [v.check for v in verdicts][1:] == ["IR execution == numpy (D)", "IR trace race check"]


# 100 rows of 32 on 2 cores: the later tile classes run under a "tile exists" guard
GUARDED = (GemmSchedule(gemm_row_scale(100, 70, 40)).tile(32, 32, 32).bind(2)
           .epilogue_on("vector", rows=8))


def test_a_guarded_tile_waits_for_its_slot_before_the_fixpipe_not_before_its_mmads() -> None:
    """In a tile loop whose body is one guard, the flags go between the guard's halves (the
    guard split there), as in an unguarded loop: the AIC waits for a free slot right before
    the Fixpipe, after the tile's Mmads, and each AIV sets "slot free" right after it read
    the slot, before its epilogue (unless it reads the slot in row steps, a loop of its own).
    Before, the wait held the whole tile and the set waited for the whole epilogue. The
    ladder's IR rungs still pass."""
    k = _lowered(GUARDED)[0]
    split = 0
    for core, flag, before, after in ((CoreType.AIC, CrossWait, "mmad", "fixpipe"),
                                      (CoreType.AIV, CrossSet, "copy_gm_ub", "vec_")):
        for loop in k.program(core).body:
            if not isinstance(loop, For) or any(
                    isinstance(e, For) for i, en in iter_instrs(loop.body) if any(
                        r.tensor == "C_ws" for r in i.reads) for e in en):
                continue
            at = [n for n, s in enumerate(loop.body) if isinstance(s, flag)]
            assert len(at) == 1
            ops = [[i.op for i, _ in iter_instrs((s,))] for s in loop.body]
            assert not any(op.startswith(after) for o in ops[:at[0]] for op in o)
            assert any(op.startswith(before) for o in ops[:at[0]] for op in o)
            assert any(op.startswith(after) for o in ops[at[0] + 1:] for op in o)
            split += any(isinstance(s, If) for s in loop.body[at[0] + 1:])
    assert split >= 3  # the AIC in its guarded class loops, the AIV in one at least
    verdicts = check(GUARDED, cpp=False, kernel=k)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def _other(kind: str):  # noqa: ANN202 -- Algorithm; 50 x 70 x 64, default schedules
    m, n, kk = 50, 70, 64
    k = reduce_axis(kk, "k")
    int8 = kind == "int8 row dequant"
    acc = "int32" if int8 else "float32"
    a = placeholder("A", (m, kk), "int8" if int8 else "float16")
    b = placeholder("B", (n, kk) if kind == "B^T exp" else (kk, n), a.dtype)
    c = compute("C", (m, n), lambda i, j: reduce_sum(a[i, k].astype(acc) * (
        b[j, k] if kind == "B^T exp" else b[k, j]).astype(acc), k, dtype=acc))
    if kind == "column scale relu":
        v = placeholder("v", (n,), "float32")
        d = compute("D", (m, n), lambda i, j: relu(c[i, j] * v[j]).astype("float16"))
    elif int8:
        s = placeholder("s", (m,), "float32")
        d = compute("D", (m, n), lambda i, j: (c[i, j].astype("float32") * s[i]).astype("float16"))
    else:
        d = compute("D", (m, n), lambda i, j: exp(c[i, j] * 0.01).astype("float16"))
    return algorithm(kind.replace(" ", "_").replace("^", ""), d)


@pytest.mark.parametrize("kind", ["column scale relu", "int8 row dequant", "B^T exp"])
def test_ir_rungs_of_other_epilogues(kind: str) -> None:
    verdicts = check(_other(kind), cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


@pytest.mark.parametrize("sched", [
    GELU, SCALE, BIAS_GELU,
    # row blocks (CubePlan.row_blocks): core 0 runs 3 blocks in 2 slots, so both channels
    GemmSchedule(gemm_softmax(150, 600, 40)).tile(32, 256, 32).bind(2)],
    ids=["gelu", "row_scale", "bias_gelu_split", "softmax_row_blocks"])
def test_dropping_any_derived_cross_flag_is_caught(sched) -> None:  # noqa: ANN001
    log = _lowered(sched)[1]
    plan = log.results["cross-core plan"]
    synced = log.results["template syncs"]  # the kernel's own syncs (its template's, copied)
    inputs = random_inputs(sched.algo, 0)
    assert len(plan.channels) == 2
    for c in plan.channels:
        k = insert_cross_sync(synced, plan.without(c.flag))
        try:
            rep = check_trace(run_kernel(k, inputs, trace=True).trace, k.target)
        except InternalCompilerError as e:
            assert "cross-core deadlock" in str(e)
            continue
        assert rep.races, f"without {c}: {rep.summary()}"


def test_the_epilogue_reference_catches_a_wrong_answer() -> None:
    sched = GELU
    inputs = random_inputs(sched.algo, 0)
    run = run_kernel(_lowered(sched)[0], inputs)
    ok, _ = vector_epilogue_error(sched.spec, sched.vector_epilogue, inputs, run.outputs["D"])
    assert ok
    bad = run.outputs["D"].copy()
    bad[32, 46] += np.float16(0.25)
    ok, msg = vector_epilogue_error(sched.spec, sched.vector_epilogue, inputs, bad)
    assert not ok and "first at [32, 46]" in msg


SOFTMAX = (GemmSchedule(gemm_softmax(40, 100, 70)).tile(16, 112, 32).bind(2)
           .epilogue_on("vector", rows=8))
BATCHED = (GemmSchedule(batched_gemm_row_scale(3, 40, 50, 30)).tile(32, 32, 32).bind(2)
           .epilogue_on("vector", rows=8).buffer("workspace", 3))
# row blocks (CubePlan.row_blocks): 3 blocks of 32 rows and an M edge's on 2 cores, each 2
# tiles of 128 columns and an N-tail tile
ROW_BLOCKS = GemmSchedule(gemm_softmax(100, 300, 70)).tile(32, 128, 32).bind(2)


@pytest.mark.slow  # ~10 to 35 s each: one simulated trace per sync channel
@pytest.mark.parametrize("sched", [GELU, SCALE, SOFTMAX, BATCHED, ROW_BLOCKS, GUARDED,
                                   gemm_row_scale(1000, 512, 256)],
                         ids=["gelu", "row_scale", "softmax", "batched_row_scale",
                              "softmax_row_blocks", "guarded", "row_scale_default_tails"])
def test_every_sync_of_a_mixed_kernel_is_needed(sched) -> None:  # noqa: ANN001
    m = sync_minimality(sched)
    assert not m.removable, str(m)
    assert m.needed > 2  # the intra-core channels and the two cross-core ones



def test_tile_classes_of_a_mixed_kernel_share_their_k_loop_ids_when_they_run_short() -> None:
    """GEMM + row softmax 1000x1000x128 by default has an N-edge class and a corner class,
    each a persistent loop around its K loop. Synchronised by itself (as when its sync
    template does not apply), with a channel per class, the AIC's MTE1->MTE2 pairs needed 8
    event ids and gave up double buffering on one id. Placed again with the classes' K-loop
    channels joined at the top of the program (insert_sync._anchor), the ids fit: ping-pong
    waits, no warning. Lowered (through its template), the ladder's IR rungs pass (numbers,
    races, deadlocks)."""
    import warnings

    from ascendsched.lower.insert_sync import insert_sync
    from ascendsched.lower.polyhedral import analyze_dependences
    from ascendsched.lower.schedule_for import schedule_for
    from ascendsched.lower.sync_ir import WaitFlag

    sched = schedule_for(gemm_softmax(1000, 1000, 128))
    planned = lower(sched, stop_after="apply memory plan")
    deps = leave_to_cross(analyze_dependences(planned),
                          plan_cross_sync(planned, planned.target), planned)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        alone = insert_sync(planned, deps, planned.target)
        k = lower(sched)
    for kern in (alone, k):
        aic = kern.program(CoreType.AIC)
        assert aic is not None
        waits = [str(i.event_id) for i, _ in iter_instrs(aic.body)
                 if isinstance(i, WaitFlag) and (i.src, i.dst) == (Pipe.MTE1, Pipe.MTE2)]
        assert any("%" in w for w in waits), waits  # ids alternate with the K step
    verdicts = check(sched, cpp=False, kernel=k)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
