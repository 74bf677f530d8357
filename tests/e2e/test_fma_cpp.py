"""The ``vec_fma`` kernels through the whole ``ascendsched check`` ladder: FusedMulAdd and
MulAddDst emitted, built with g++ against the host runtime (emit_ascendc/runtime/
kernel_operator.h), run, equal to numpy, their trace equal to the IR trace and race-free."""

import pytest

from ascendsched.algo import library as L
from ascendsched.api.check import check
from ascendsched.lower.ir import iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule
from tests.kit.reference import LAYERNORM, row_tiles
from tests.lower.test_select_fma import _mul_add_exp

pytestmark = pytest.mark.slow  # g++ builds and runs

CASES = {
    # 23 rows in tiles of 4 on 2 cores (a 3-row tail), 1000 = 15 * 64 + 40 lanes per row
    "layernorm 23x1000 rows 4 cores 2": lambda: row_tiles(L.layernorm(23, 1000), 4, LAYERNORM)
    .bind("y", "i_o", 2).buffer("x", 2).buffer("y", 2),
    "mul_add_exp 10x200 rows 4": lambda: Schedule(_mul_add_exp(10, 200)).split("y", "i", 4),
}


@pytest.mark.parametrize("case_id", list(CASES))
def test_fma_kernel_passes_every_rung(case_id: str) -> None:
    sched = CASES[case_id]()
    k = lower(sched)
    assert any(i.op == "vec_fma" for p in k.programs for i, _ in iter_instrs(p.body))
    vs = check(sched, kernel=k, sanitize=True)
    names = [v.check for v in vs]
    assert "g++ build of emitted C++" in names and "C++ trace == IR trace" in names, names
    failed = [str(v) for v in vs if not v.ok]
    assert not failed, f"{case_id}:\n" + "\n".join(failed)
