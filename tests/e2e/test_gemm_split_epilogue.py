"""An epilogue split between the Cube core and the Vector cores (issue 13 point 4): a bias added
by Mmad from the bias table, GELU on the Vector cores, one mixed kernel. By default when the
Fixpipe cannot apply every step; ``epilogue_on('vector', after='D')`` or ``place('D',
'fixpipe')`` + ``place('E', 'vector')`` by hand. Shapes with tails in M, N and K."""

from __future__ import annotations

import re

import pytest

from ascendsched.algo import algorithm, compute, placeholder
from ascendsched.algo import library as L
from ascendsched.algo.ops import exp, relu
from ascendsched.api.check import check
from ascendsched.api.sync_minimality import sync_minimality
from ascendsched.lower.ir import iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.schedule.schedule import Schedule
from ascendsched.target import CoreType

HAND = {
    "after D, 1:1, 3 slots": lambda: GemmSchedule(L.gemm_bias_gelu(100, 130, 90))
    .epilogue_on("vector", rows=8, vector_cores=1, after="D").tile(64, 64, 64).split_k(32)
    .buffer("l1", 2).bind(2).buffer("workspace", 3),
    "after D, 1:2, swizzle": lambda: GemmSchedule(L.gemm_bias_gelu(33, 47, 70))
    .epilogue_on("vector", after="D").tile(16, 32, 32).buffer("l0", 2).bind(3)
    .swizzle(2, "m"),
    "general spelling": lambda: Schedule(L.gemm_bias_gelu(100, 130, 90))
    .tile("C", ("i", "j"), (32, 64)).split("C", "k", 32).tensorize("C", "k_i")
    .fuse("C", "i_o", "j_o").bind("C", "i_o_j_o", 3)
    .place("D", "fixpipe").place("E", "vector", rows=8),
}


def bias_relu_exp(m: int, n: int, k: int):  # noqa: ANN201 -- Algorithm
    """D = relu(C + bias[j]) on the Cube core (bias table, Fixpipe ReLU), E = exp(-D / 10) on
    the Vector cores: E <= 1 only if the ReLU really ran before the workspace."""
    c = L.gemm_bias_gelu(m, n, k).tensor("C")
    bias = placeholder("bias", (n,), "float32")
    d = compute("D", (m, n), lambda i, j: relu(c[i, j] + bias[j]))
    return algorithm("bias_relu_exp", compute("E", (m, n), lambda i, j:
                                              exp(d[i, j] * -0.1).astype("float16")))


def _ops(kernel, core: CoreType) -> list[str]:  # noqa: ANN001
    prog = next(p for p in kernel.programs if p.core == core)
    return [i.op for i, _ in iter_instrs(prog.body)]


def test_the_default_keeps_the_bias_on_the_cube_and_gelu_on_the_vector_cores() -> None:
    s = schedule_for(L.gemm_bias_gelu(100, 130, 90))
    assert s.plan.spec.epilogue.bias == "bias"
    assert str(s.plan.vector_epilogue) == "vector epilogue E = f(D_ws)"
    k = lower(s)
    aic = _ops(k, CoreType.AIC)
    assert "mmad_bias" in aic and "copy_l1_bt" in aic
    aiv_reads = {r.tensor for p in k.programs if p.core == CoreType.AIV
                 for i, _ in iter_instrs(p.body) for r in i.reads}
    assert "bias" not in aiv_reads and "D_ws" in aiv_reads  # the Vector cores never see it


def test_the_whole_epilogue_on_the_vector_cores_is_still_a_choice() -> None:
    s = GemmSchedule(L.gemm_bias_gelu(100, 130, 90)).epilogue_on("vector").tile(64, 64, 64)
    assert s.plan.spec.epilogue.bias is None
    assert str(s.plan.vector_epilogue) == "vector epilogue E = f(C_ws, bias)"
    assert "mmad_bias" not in _ops(lower(s), CoreType.AIC)


def test_the_general_spelling_is_the_sugar_s_kernel() -> None:
    sugar = (GemmSchedule(L.gemm_bias_gelu(100, 130, 90)).epilogue_on("vector", rows=8,
             after="D").tile(32, 64, 32).bind(3))
    assert ".epilogue_on('vector', rows=8, after='D')" in str(sugar)
    general = sugar.schedule
    assert ".place('D', 'fixpipe')" in str(general)
    assert ".place('E', 'vector', rows=8)" in str(general)

    def text(k) -> str:  # noqa: ANN001
        return "\n".join(x for x in re.sub("#.*", "", str(k)).splitlines() if x.strip())

    assert text(lower(sugar)) == text(lower(general))


@pytest.mark.parametrize("name", list(HAND))
def test_ir_ladder_hand(name: str) -> None:
    bad = [str(v) for v in check(HAND[name](), cpp=False) if not v.ok]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("make", [L.gemm_bias_gelu, bias_relu_exp])
def test_ir_ladder_default(make) -> None:  # noqa: ANN001
    s = schedule_for(make(33, 47, 70))
    assert str(s.plan.vector_epilogue) == "vector epilogue E = f(D_ws)"
    bad = [str(v) for v in check(s, cpp=False) if not v.ok]
    assert not bad, "\n".join(bad)


def test_the_relu_kept_on_the_cube_runs_on_the_fixpipe() -> None:
    k = lower(schedule_for(bias_relu_exp(33, 47, 70)))
    fix = [i for p in k.programs if p.core == CoreType.AIC for i, _ in iter_instrs(p.body)
           if i.op == "fixpipe"]
    assert fix and all(i.attr("reluEn") is True for i in fix)


@pytest.mark.slow  # g++ builds and runs
@pytest.mark.parametrize("name", ["default", "default relu exp"] + list(HAND))
def test_cpp_ladder(name: str) -> None:
    s = {"default": lambda: L.gemm_bias_gelu(100, 130, 90),
         "default relu exp": lambda: bias_relu_exp(100, 130, 90)}.get(name, HAND.get(name))()
    verdicts = check(s)
    bad = [str(v) for v in verdicts if not v.ok]
    assert not bad, "\n".join(bad)
    assert "C++ trace race check" in [v.check for v in verdicts]


@pytest.mark.slow  # one simulated trace per sync channel
def test_every_sync_of_the_split_kernel_is_needed() -> None:
    m = sync_minimality(HAND["after D, 1:2, swizzle"]())
    assert not m.removable, str(m)
    assert m.needed > 2
