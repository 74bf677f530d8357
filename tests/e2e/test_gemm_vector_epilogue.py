"""GEMM + Vector epilogue as one mixed kernel (issue 13 point 3, first slice), end to end: the
emitted AscendC reads as one MIX kernel with a comment per cross-core flag, and (slow) the whole
check ladder with g++ passes for GELU, row scale and residual epilogues, a batched GEMM with a
per-batch row scale and a row softmax of GEMM scores ("minicv", tiles of whole rows), default
and hand schedules, shapes with tails in M, N and K."""

from __future__ import annotations

import pytest

from ascendsched.algo import algorithm, compute, placeholder, reduce_axis, reduce_sum
from ascendsched.algo import library as L
from ascendsched.algo.ops import exp
from ascendsched.api.check import check
from ascendsched.emit_ascendc.project import emit_project
from ascendsched.lower.pipeline import lower
from ascendsched.schedule.gemm import GemmSchedule
from tests.e2e.test_gemm_row_blocks import HAND as ROW_BLOCKS

# 33 x 47 x 70 and 100 x 130 x 90: tails in M, N and K for every tile below
HAND = {
    "gelu": lambda: GemmSchedule(L.gemm_gelu(33, 47, 70)).tile(32, 32, 32).split_k(16)
    .buffer("l0", 2).epilogue_on("vector", rows=8),
    "gelu_100x130x90": lambda: GemmSchedule(L.gemm_gelu(100, 130, 90)).tile(64, 64, 64)
    .buffer("l1", 2).bind(2).buffer("workspace", 3),
    "row_scale": lambda: GemmSchedule(L.gemm_row_scale(100, 130, 90)).tile(32, 64, 32)
    .bind(3).swizzle(2, "m").buffer("workspace", 3),
    "residual": lambda: GemmSchedule(L.gemm_residual(100, 130, 90)).tile(64, 32, 64).bind(2)
    .buffer("workspace", 1),
    "batched_row_scale": lambda: GemmSchedule(L.batched_gemm_row_scale(3, 40, 50, 30))
    .tile(32, 32, 32).bind(2).epilogue_on("vector", rows=8).buffer("workspace", 3),
    "softmax": lambda: GemmSchedule(L.gemm_softmax(40, 100, 70)).tile(16, 112, 32).bind(2)
    .epilogue_on("vector", rows=8),
    "batched_row_scale_shared_b": lambda: GemmSchedule(L.batched_gemm_row_scale(
        2, 33, 47, 70, shared_b=True)).tile(16, 32, 32).buffer("l1", 2).bind(3),
}
HAND.update({f"row_blocks_{name}": make for name, make in ROW_BLOCKS.items()})
DEFAULT = {
    "gelu": lambda: L.gemm_gelu(33, 47, 70),
    "gelu_100x130x90": lambda: L.gemm_gelu(100, 130, 90),
    "row_scale": lambda: L.gemm_row_scale(100, 130, 90),
    "row_scale_33x47x70": lambda: L.gemm_row_scale(33, 47, 70),
    "batched_row_scale": lambda: L.batched_gemm_row_scale(3, 40, 50, 30),
    "softmax": lambda: L.gemm_softmax(100, 130, 90),
    "softmax_row_blocks": lambda: L.gemm_softmax(100, 3000, 90),  # rows wider than L0C holds
}


def test_the_emitted_mix_kernel_reads_well(tmp_path) -> None:  # noqa: ANN001
    k = lower(HAND["row_scale"]())
    src = emit_project(k, tmp_path).kernel_source
    aic, aiv = src.index("if ASCEND_IS_AIC {"), src.index("if ASCEND_IS_AIV {")
    assert "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);" in src
    assert "const int64_t block_idx = GetBlockIdx() / GetSubBlockNum();" in src
    assert "const int64_t sub_block_idx = GetSubBlockIdx();" in src[aiv:]
    assert "GlobalTensor<float> C_ws_gm;  // workspace float32[9, 2048]" in src
    assert ("CrossCoreWaitFlag<2, PIPE_FIX>(1);  // slot free, from both AIVs (of 3 tiles back): "
            "C_ws: AIV MTE2 copy_gm_ub -> AIC FIX fixpipe (WAR)") in src[aic:aiv]
    assert ("CrossCoreSetFlag<2, PIPE_FIX>(0);  // data ready, to both AIVs: C_ws: AIC FIX "
            "fixpipe -> AIV MTE2 copy_gm_ub (RAW)") in src[aic:aiv]
    assert ("CrossCoreSetFlag<2, PIPE_MTE2>(1);  // slot free, from both AIVs 1 of 3 before the "
            "tiles: C_ws: AIV MTE2 copy_gm_ub -> AIC FIX fixpipe (WAR)") in src[aiv:]
    assert "CrossCoreWaitFlag<2, PIPE_MTE2>(0);  // data ready, to both AIVs" in src[aiv:]
    # per tile loop (one per Fixpipe) a wait and a set on each core; 3 initial free slots
    # (AIV) and 3 final waits (AIC)
    assert src.count("CrossCore") == 4 * src[aic:aiv].count("Fixpipe<") + 2 * 3


def test_the_one_to_one_opt_out_reads_as_before(tmp_path) -> None:  # noqa: ANN001
    """``epilogue_on('vector', vector_cores=1)``: one AIV per block, no sub-block index."""
    s = (GemmSchedule(L.gemm_row_scale(100, 130, 90)).tile(32, 64, 32).bind(3)
         .epilogue_on("vector", vector_cores=1))
    assert ".epilogue_on('vector', vector_cores=1)" in str(s)
    k = lower(s)
    assert k.sub_blocks == 1
    src = emit_project(k, tmp_path).kernel_source
    assert "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_1);" in src
    assert "GetSubBlock" not in src
    assert "CrossCoreWaitFlag<2, PIPE_MTE2>(0);  // data ready: C_ws" in src


@pytest.mark.parametrize("name", ["batched_row_scale", "batched_row_scale_shared_b", "softmax"])
def test_batched_and_softmax_ir_rungs(name: str) -> None:
    verdicts = check(HAND[name](), cpp=False)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))


def test_a_large_mixed_kernel_is_checked_through_its_reduced_instance() -> None:
    """An epilogue inlined into the GEMM stage (its sum under exp), 4 cores, 3 slots: the
    reduced instance keeps the Vector epilogue, its step rows and the workspace slots."""
    m, n, kk = 300, 200, 64
    a, b = placeholder("A", (m, kk)), placeholder("B", (kk, n))
    k = reduce_axis(kk, "k")
    d = compute("D", (m, n), lambda i, j: exp(reduce_sum(
        a[i, k].astype("float32") * b[k, j].astype("float32"), k) * 0.01).astype("float16"))
    s = (GemmSchedule(algorithm("g", d)).tile(32, 32, 32).bind(4).epilogue_on("vector", rows=8)
         .buffer("workspace", 3))
    verdicts = check(s, cpp=False, reduce=True)
    assert all(v.ok for v in verdicts), "\n".join(map(str, verdicts))
    assert "on gemm 172 x 104 x 64 on 2 cores" in str(verdicts[-1])


@pytest.mark.slow  # g++ builds and runs
@pytest.mark.parametrize("name", list(HAND))
def test_cpp_ladder_hand(name: str) -> None:
    bad = [str(v) for v in check(HAND[name]()) if not v.ok]
    assert not bad, "\n".join(bad)


@pytest.mark.slow  # g++ builds and runs
@pytest.mark.parametrize("name", list(DEFAULT))
def test_cpp_ladder_default(name: str) -> None:
    verdicts = check(DEFAULT[name]())
    bad = [str(v) for v in verdicts if not v.ok]
    assert not bad, "\n".join(bad)
    assert "C++ trace race check" in [v.check for v in verdicts]
