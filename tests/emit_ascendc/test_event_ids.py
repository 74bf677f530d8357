"""Every event id and flag id the target hands out, against what the AscendC library itself
uses on the 910B (dav-c220), and every API the emitter calls, against the ones whose library
implementation places flags of its own (fast: text only, no g++).

Sources (mirror-cann/asc-devkit):
- docs/zh/api/SIMD-API/基础API/同步控制/核内同步/SetFlag-WaitFlag(ISASI).md:78, 88: ids 0..7
  exist on the A2; hand-placed flags should use 0..5 (6 is reserved, 7 is TPipe's auto-sync).
- impl/basic_api/kernel_tpipe_impl.h:100-113, 571-581: the AIC's TPipe sets M_MTE1 0, 1, 2
  until Destroy; the emitter destroys it before the first flag (test_runtime_fidelity proves
  the runtime catches the other order).
- docs/zh/api/SIMD-API/基础API/同步控制/核间同步/CrossCoreSetFlag(ISASI).md:103, 133 and
  impl/basic_api/dav_c220/kernel_operator_sync_impl.h:117-120: cross-core flag ids 0..15,
  SyncAll (and the task-chaining calls) own 11..14.
- impl/basic_api/dav_c220: the only basic APIs that place flags of their own
  (``GetTPipePtr()->FetchEventID``, which hands out id 0 when no TQue holds one, so it would
  collide with a kernel's flag 0) are ReduceSum/ReduceMax/ReduceMin (kernel_operator_vec_reduce_impl.h:
  175-185, 374-381, 610-680), CreateVecIndex (kernel_operator_vec_createvecindex_impl.h:1567,
  1602), UB -> L1 DataCopy/DataCopyPad (kernel_operator_data_copy_impl.h:164, 228, 686, 746) and
  the soft SyncAll (kernel_operator_sync_impl.h:40-47, 84-109). The emitter calls none of them.
"""

from __future__ import annotations

import re

import pytest

from ascendsched.algo import library as L
from ascendsched.emit_ascendc.kernel_printer import _KernelPrinter
from ascendsched.lower.pipeline import lower
from ascendsched.lower.schedule_for import schedule_for
from ascendsched.schedule.gemm import GemmSchedule
from ascendsched.target import ASCEND_910B
from tests.emit_ascendc.test_cube_mixed import mixed_kernel

# The AscendC calls the emitter may print; each was checked to place no flag in its dav_c220
# implementation (module docstring). A new call must be checked before it joins the list.
# BlockReduceSum/Max/Min: SetMask, then vcgadd/vcgmax/vcgmin (asc-devkit @2e0db4c9,
# impl/basic_api/dav_c220/kernel_operator_vec_reduce_impl.h, BlockReduce*Impl).
# FusedMulAdd/MulAddDst level 0: SetMask, then vmadd/vmla (asc-devkit @82b89a15,
# impl/basic_api/dav_c220/kernel_operator_vec_binary_impl.h, FusedMulAddImpl/MulAddDstImpl).
NO_LIBRARY_FLAGS = frozenset({
    "Abs", "Add", "Adds", "BlockReduceMax", "BlockReduceMin", "BlockReduceSum", "Brcb", "Cast", "CrossCoreSetFlag", "CrossCoreWaitFlag", "DataCopy",
    "DataCopyPad", "Destroy", "Div", "Duplicate", "Exp", "Fixpipe", "FusedMulAdd", "Get",
    "GetBlockIdx",
    "GetWithOffset", "InitBuffer",
    "Ln", "LoadData", "LoadDataWithTranspose", "Max", "Maxs", "Min", "Mins", "Mmad", "Mul",
    "MulAddDst", "Muls", "PipeBarrier", "Reciprocal", "Relu", "Rsqrt", "SetFlag", "SetGlobalBuffer",
    "SetSyncBaseAddr", "Sqrt",
    "Sub", "WaitFlag", "WholeReduceMax", "WholeReduceMin", "WholeReduceSum",
})
# Constructors of parameter structs and types, not library calls.
_NOT_CALLS = re.compile(r"(Params|ParamsV220|LocalTensor|KERNEL_TASK_TYPE_\w+)$")
LIBRARY_FLAGS = {"ReduceSum", "ReduceMax", "ReduceMin", "CreateVecIndex", "SyncAll"}


def _kernels():
    for name, make in L.VECTOR_KERNELS.items():
        yield name, lower(schedule_for(make()))
    yield "gemm_l0_db", lower(GemmSchedule(L.gemm(m=40, n=24, k=96, dtype="float16",
                                                  out_dtype="float32"))
                              .tile(48, 32, 96).split_k(32).buffer("l0", 2))
    yield "gemm_int8", lower(schedule_for(L.gemm(m=70, n=50, k=90, dtype="int8",
                                                 out_dtype="int32")))
    yield "mixed", mixed_kernel()


KERNELS = dict(_kernels())


def _code(src: str) -> str:
    lines = (line.split("//")[0].strip() for line in src.splitlines())
    return "\n".join(line for line in lines if line)


def test_hand_event_ids_are_the_documented_free_ones():
    assert set(ASCEND_910B.event_ids) <= set(range(6))  # SetFlag-WaitFlag(ISASI).md:78
    assert set(ASCEND_910B.cross_flag_ids) <= set(range(16))  # CrossCoreSetFlag(ISASI).md:103
    assert not set(ASCEND_910B.cross_flag_ids) & {11, 12, 13, 14}  # SyncAll's, ibid.:133


@pytest.mark.parametrize("name", list(KERNELS))
def test_emitted_calls_place_no_library_flags(name):
    code = _code(_KernelPrinter(KERNELS[name]).print())
    calls = {m.group(1) for m in re.finditer(r"\b([A-Z]\w*)\s*(?:<[^;()]*>)?\s*\(", code)}
    calls = {c for c in calls if not _NOT_CALLS.search(c)}
    assert calls <= NO_LIBRARY_FLAGS, f"{name}: unchecked AscendC calls {calls - NO_LIBRARY_FLAGS}"
    assert not calls & LIBRARY_FLAGS
    ids = {int(i) for i in re.findall(r"(?:SetFlag|WaitFlag)<HardEvent::\w+>\((\d+)\)", code)}
    assert ids <= set(ASCEND_910B.event_ids), name


@pytest.mark.parametrize("name", [n for n in KERNELS if "gemm" in n or n == "mixed"])
def test_aic_flags_follow_the_tpipe_release(name):
    code = _code(_KernelPrinter(KERNELS[name]).print())
    aic = code[code.index("if ASCEND_IS_AIC"):]
    aic = aic[:aic.index("if ASCEND_IS_AIV")] if "if ASCEND_IS_AIV" in aic else aic
    first_flag = min(aic.index(f) for f in ("SetFlag<", "WaitFlag<") if f in aic)
    assert aic.index("pipe.Destroy();") < first_flag  # kernel_tpipe_impl.h:100-113
    stmts = [line for line in aic.splitlines() if line != "}"]
    assert stmts[-1] == "PipeBarrier<PIPE_ALL>();"  # 静态Tensor编程.md:183
