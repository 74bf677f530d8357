"""The machine-model vocabulary: pipes, memory scopes, core types and the Target record.

Numbers live in concrete targets (``ascend910b.py``), each with its source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ascendsched.target.costs import CostModel


class Pipe(str, Enum):
    """Instruction queues of an AI Core (AscendC ``pipe_t``: PIPE_S, PIPE_V, PIPE_MTE1...)."""

    S = "S"
    V = "V"
    MTE1 = "MTE1"
    MTE2 = "MTE2"
    MTE3 = "MTE3"
    M = "M"
    FIX = "FIX"
    ALL = "ALL"

    def __str__(self) -> str:
        return self.value


class Scope(str, Enum):
    """Memory scopes. GM is global memory; the rest are on-chip buffers."""

    GM = "GM"
    UB = "UB"
    L1 = "L1"
    L0A = "L0A"
    L0B = "L0B"
    L0C = "L0C"
    BT = "BT"  # the Cube core's bias table (TPosition C2), read by Mmad with a bias

    def __str__(self) -> str:
        return self.value


class CoreType(str, Enum):
    AIC = "AIC"  # Cube core
    AIV = "AIV"  # Vector core

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ScopeSpec:
    """One on-chip buffer: usable bytes for user buffers and the address alignment."""

    scope: Scope
    capacity: int  # physical bytes
    usable: int  # bytes a kernel may plan into
    alignment: int  # byte alignment of every planned buffer start
    core: CoreType
    source: str


@dataclass(frozen=True)
class Target:
    """A machine model. Everything hardware-specific the compiler needs, in one record."""

    name: str
    npu_arch: str
    num_aic: int
    num_aiv: int
    aiv_per_aic: int
    clock_hz: float
    scopes: tuple[ScopeSpec, ...]
    block_bytes: int  # DMA / vector block granule (32 B)
    repeat_bytes: int  # bytes one vector repeat processes (256 B)
    max_repeat: int  # repeat count limit of one vector instruction (uint8: 255)
    max_rep_stride: int  # repeat stride limit, in blocks (uint8: 255)
    event_ids: tuple[int, ...]  # ids usable by hand-placed SetFlag/WaitFlag
    hard_events: dict[CoreType, frozenset[tuple[Pipe, Pipe]]]
    # Same-pipe ordering: True when a later instruction on the pipe may overtake an earlier
    # dependent one unless PipeBarrier<pipe> separates them (see ascend910b.py for sources).
    needs_same_pipe_barrier: dict[Pipe, bool]
    cross_flag_ids: tuple[int, ...]
    cross_flag_max_pending: int
    gm_bytes_per_s: float
    vector_dtypes: dict[str, frozenset[str]]  # vector fn -> dtypes the V unit supports
    # (src dtype, dst dtype) -> the round modes ``Cast`` accepts for that pair (IR names)
    vector_casts: dict[tuple[str, str], frozenset[str]]
    sources: dict[str, str]
    max_dma_block_count: int = 4095  # DataCopyParams.blockCount limit (rows of one DataCopy)
    brcb_elems_per_repeat: int = 8  # Brcb broadcasts 8 source elements per repeat
    # (src, dst) -> intermediate dtypes of an exact chain of Casts for a pair Cast lacks
    cast_chains: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    cube_rows: int = 16  # rows of an L0A/L0B fractal; L0C fractals are rows x rows
    cube_fractal_bytes: int = 512  # one L0A/L0B fractal (rows x one 32 B block)
    # blockLen unit of the L1 -> BiasTable DataCopy (64 B on 910B; 32 B on 950: docs
    # DataCopy（L1ToBiasTable-Buffer数据搬运）.md 约束说明)
    bias_block_bytes: int = 64
    # unit of the L1 -> Fixpipe-buffer copy of a per-channel quant tensor (128 B on 910B:
    # asc-devkit impl/basic_api/dav_c220/kernel_operator_fixpipe_v2_impl.h CopyDeqTensorToFbuf),
    # so a kernel's quant words come in whole units
    fixpipe_quant_unit_bytes: int = 128
    # quant words the Fixpipe buffer holds for one Fixpipe call: a call with more columns is
    # split by the API into calls of half as many (double-buffered FB), each with its own
    # L1 -> FB copy (kernel_operator_fixpipe_v2_impl.h GenFixpipeTilingV220: maxDeqNums = 256)
    fixpipe_quant_buffer_cols: int = 256
    # documented value range of each integer parameter of the Cube calls (per IR op)
    cube_param_ranges: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    # Consecutive Mmads of at least this many output fractals, (m / 16) * (n / 16), are ordered
    # by the hardware without PipeBarrier<PIPE_M> (0: never); see ascend910b.py for the source
    mmad_ordered_fractals: int = 0
    # timing-model parameters (sim/timing.py), each with its source in target/costs.py
    costs: CostModel | None = None
    # (vector fn, dtype) -> largest relative error the simulator and the CPU runtime give that
    # instruction's results (sim/precision.py); absent: the result is correctly rounded
    approx_rel_error: dict[tuple[str, str], float] = field(default_factory=dict)

    def scope(self, scope: Scope) -> ScopeSpec:
        for s in self.scopes:
            if s.scope == scope:
                return s
        raise KeyError(scope)

    def cores(self, core: CoreType) -> int:
        return self.num_aic if core == CoreType.AIC else self.num_aiv

    def elems_per_repeat(self, dtype_bytes: int) -> int:
        return self.repeat_bytes // dtype_bytes

    def elems_per_block(self, dtype_bytes: int) -> int:
        return self.block_bytes // dtype_bytes

    def is_legal_event(self, core: CoreType, src: Pipe, dst: Pipe) -> bool:
        return (src, dst) in self.hard_events[core]
