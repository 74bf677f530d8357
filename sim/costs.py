"""The cost of one IR instruction under the timing model: its pipe, duration, head and tail.

Rules (parameters from ``target/costs.py``, each with its source):

- DMA (``copy_gm_ub``, ``copy_ub_gm``, ``fixpipe``): ``head + max(rows * row_cycles,
  bytes / rate)``, one copy after the other; ``rows`` = GM rows moved as separate bursts (1 for
  a contiguous copy, ``mSize`` for Fixpipe). GM -> L1 with ND -> NZ (``copy_gm_l1``) is
  pipelined: its ``ndNum * nValue`` row requests and its bytes are two resources that
  consecutive copies share (the next copy's data streams while this one's rows are still being
  requested), plus the head latency (the engine keeps both clocks). Evidence: the ASC matmul
  cases 0-1 and the tiling case's 128x256x64 step cost the sum of the rows of A and B times
  ~3.5 cycles, not a per-copy maximum. The rate of a GM read mixes the L2-hit and HBM per-core
  rates by the tensor's L2 hit fraction.
- LoadData: ``head_l1_l0 + bytes / rate`` (L0A and L0B rates differ).
- Per-channel quant (``copy_gm_l1_cont``: one contiguous GM -> L1 row, pipelined like
  ``copy_gm_l1``; ``fixpipe_quant``: the Fixpipe plus, per chunk of quant words the API moves
  L1 -> Fixpipe buffer (one, or half of the target's ``fixpipe_quant_buffer_cols`` each past
  them: 128 past 256 on 910B), ``head_l1_l0 + bytes / l1_l0b_rate``
  and a ``barrier`` (its PipeBarrier<PIPE_FIX>). No published cost of the L1 -> FB copy: priced
  as an MTE1 move into L0B like ``copy_l1_bt`` (GUESS); VDEQF16 is taken to run at the
  Fixpipe's F322F16 rate (GUESS).
- Mmad: ``ceil(m/16) * ceil(k/K0) * ceil(n/16) * cycles(dtype)``, plus ``mmad_head`` when the
  M pipe's stream was interrupted (decided by the engine).
- Vector: ``slope(fn, dtype) * repeats`` (a bank-group conflict between the sources raises a
  repeat's slope to ``1 + (beats - 1) * bank_beat``, averaged over the repeats' pattern), plus
  ``vec_head`` when the V stream was interrupted and ``vec_tail`` before a flag or barrier
  sees the work done.
- Syncs cost their ``CostModel`` latencies; the engine gives them their semantics.

Values are never computed: a timing run reads only shapes, dtypes and planned addresses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ascendsched.errors import InternalCompilerError
from ascendsched.lower.bank_groups import bank_invariant, beats, footprint
from ascendsched.lower.cube_ops import CUBE_LOAD_OPS, cube_c0
from ascendsched.lower.ir import VECTOR_OPS, Instr, Kernel, Region
from ascendsched.lower.sync_ir import Sync
from ascendsched.target.costs import GIB, CostModel, interp_cores
from ascendsched.target.model import Pipe, Scope, Target

PIPES = (Pipe.S, Pipe.V, Pipe.MTE1, Pipe.MTE2, Pipe.MTE3, Pipe.M, Pipe.FIX)
PIPE_INDEX = {p: i for i, p in enumerate(PIPES)}
KIND_DMA, KIND_MTE1, KIND_MMAD, KIND_VEC, KIND_SYNC = "dma", "mte1", "mmad", "vec", "sync"
KIND_PIPELINED = "dma-pipelined"


@dataclass(frozen=True)
class Rates:
    """Per-core bytes per cycle of each GM path for one kernel run (contention applied)."""

    gm_ub_hbm: float
    gm_ub_l2: float
    gm_l1_hbm: float
    gm_l1_l2: float
    ub_gm: float
    l0c_gm: float
    hit: tuple[tuple[str, float], ...]  # GM tensor -> L2 hit fraction of its reads

    def read_rate(self, tensor: str, hbm: float, l2: float) -> float:
        h = dict(self.hit).get(tensor, 0.0)
        return 1.0 / (h / l2 + (1.0 - h) / hbm)


def core_rates(costs: CostModel, target: Target, active: int, hit: dict[str, float],
               hbm_slow: float = 1.0, l2_slow: float = 1.0) -> Rates:
    """Per-core rates with ``active`` cores streaming; ``*_slow`` >= 1 stretch the HBM- and
    L2-served parts when the chip-wide caps bind (sim/timing.py's fixed point)."""
    to_bpc = GIB / target.clock_hz * costs.core_rate_scale
    read = interp_cores(costs.gm_ub_core, active)
    shape = costs.read_share(active)
    write = interp_cores(costs.ub_gm_core, active)
    wshape = costs.write_share(active)
    return Rates(
        gm_ub_hbm=read * to_bpc / hbm_slow,
        gm_ub_l2=costs.gm_ub_l2_1core * shape * to_bpc / l2_slow,
        gm_l1_hbm=costs.gm_l1_hbm_1core * shape * to_bpc / hbm_slow,
        gm_l1_l2=costs.gm_l1_l2_1core * shape * to_bpc / l2_slow,
        ub_gm=write * to_bpc / l2_slow,
        l0c_gm=costs.l0c_gm_rate * wshape * costs.core_rate_scale / l2_slow,
        hit=tuple(sorted(hit.items())),
    )


@dataclass(frozen=True)
class Cost:
    """One instruction's cost. ``dur`` excludes the conditional ``head`` (vector, Mmad)."""

    pipe: int
    kind: str
    dur: float
    head: float = 0.0
    tail: float = 0.0
    name: str = ""
    flops: float = 0.0
    repeats: int = 0
    gm_bytes: int = 0
    # pipelined DMA (ND->NZ): row requests and data of consecutive copies overlap; dur unused
    req: float = 0.0
    data: float = 0.0


class CostTable:
    """Costs of a kernel's instructions under one cost model and one set of rates.

    Static costs are cached per instruction; vector ops whose bank-conflict beats depend on a
    loop variable are priced per instance (``cost(ins, env)``).
    """

    def __init__(self, kernel: Kernel, costs: CostModel, rates: Rates) -> None:
        self.k, self.c, self.r = kernel, costs, rates
        self._cache: dict[int, Cost] = {}
        self.variant: set[int] = set()
        self._beats: dict[tuple, list[int]] = {}  # (source footprints, repeats) -> beats

    def cost(self, ins: Instr, env: dict[str, int]) -> Cost:
        key = ins.id
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        c = self._price(ins, env)
        if key not in self.variant:
            self._cache[key] = c
        return c

    # ------------------------------------------------------------------ pricing
    def _price(self, ins: Instr, env: dict[str, int]) -> Cost:
        op, c, r = ins.op, self.c, self.r
        pipe = PIPE_INDEX[ins.pipe]
        if isinstance(ins, Sync):
            return Cost(pipe, KIND_SYNC, 0.0, name=op)
        if op == "copy_gm_ub":
            gm = ins.reads[0]
            rate = r.read_rate(gm.tensor, r.gm_ub_hbm, r.gm_ub_l2)
            return self._dma(pipe, c.head_gm_ub, gm, rate, f"copy_gm_ub {gm.tensor}")
        if op == "copy_ub_gm":
            gm = ins.writes[0]
            return self._dma(pipe, c.head_ub_gm, gm, r.ub_gm, f"copy_ub_gm {gm.tensor}")
        if op == "copy_gm_l1":
            gm = ins.reads[0]
            p = dict(ins.attrs)
            eb = self.k.dtype_of(gm.tensor).bytes
            rows = p["ndNum"] * p["nValue"]
            nbytes = rows * p["dValue"] * eb
            rate = r.read_rate(gm.tensor, r.gm_l1_hbm, r.gm_l1_l2)
            return Cost(pipe, KIND_PIPELINED, 0.0, head=c.head_gm_l1,
                        name=f"copy_gm_l1 {gm.tensor}", gm_bytes=nbytes,
                        req=rows * c.row_cycles, data=nbytes / rate)
        if op == "copy_gm_l1_cont":
            gm = ins.reads[0]
            nbytes = gm.count * self.k.dtype_of(gm.tensor).bytes
            rate = r.read_rate(gm.tensor, r.gm_l1_hbm, r.gm_l1_l2)
            return Cost(pipe, KIND_PIPELINED, 0.0, head=c.head_gm_l1,
                        name=f"copy_gm_l1_cont {gm.tensor}", gm_bytes=nbytes,
                        req=c.row_cycles, data=nbytes / rate)
        if op in ("fixpipe", "fixpipe_quant"):
            gm = ins.writes[0]
            p = dict(ins.attrs)
            rows = p["ndNum"] * p["mSize"]
            nbytes = rows * p["nSize"] * self.k.dtype_of(gm.tensor).bytes
            dur = c.head_l0c_gm + max(rows * c.row_cycles, nbytes / r.l0c_gm)
            if op == "fixpipe_quant":  # the API's L1 -> FB copies (module docstring, GUESS)
                q = ins.reads[1]
                fb = self.k.target.fixpipe_quant_buffer_cols
                chunks = 1 if p["nSize"] <= fb else math.ceil(p["nSize"] / (fb // 2))
                qbytes = q.count * self.k.dtype_of(q.tensor).bytes
                dur += chunks * (c.head_l1_l0 + c.barrier) + qbytes / c.l1_l0b_rate
            return Cost(pipe, KIND_DMA, dur, name=f"{op} {gm.tensor}", gm_bytes=nbytes)
        if op in CUBE_LOAD_OPS:
            p = dict(ins.attrs)
            nfrac = 2 if op.endswith("_transpose") and self.k.dtype_of(
                ins.writes[0].tensor).bytes in (1, 4) else 1
            nbytes = p["repeatTimes"] * nfrac * 512
            rate = c.l1_l0a_rate if ins.writes[0].tensor and self.k.scope_of(
                ins.writes[0].tensor) == Scope.L0A else c.l1_l0b_rate
            return Cost(pipe, KIND_MTE1, c.head_l1_l0 + nbytes / rate,
                        name=f"{op} {ins.writes[0].tensor}")
        if op == "copy_l1_bt":  # L1 -> bias table: priced as an MTE1 move into L0B
            nbytes = sum(r.count for r in ins.writes) * self.k.dtype_of(
                ins.writes[0].tensor).bytes
            return Cost(pipe, KIND_MTE1, c.head_l1_l0 + nbytes / c.l1_l0b_rate,
                        name=f"copy_l1_bt {ins.writes[0].tensor}")
        if op in ("mmad", "mmad_bias"):
            p = dict(ins.attrs)
            dt = self.k.dtype_of(ins.reads[0].tensor)
            k0 = cube_c0(dt, self.k.target)
            fr = math.ceil(p["m"] / 16) * math.ceil(p["k"] / k0) * math.ceil(p["n"] / 16)
            return Cost(pipe, KIND_MMAD, fr * c.mmad_fractal_cycles(dt.name), head=c.mmad_head,
                        name="mmad", flops=2.0 * p["m"] * p["n"] * p["k"])
        if op in VECTOR_OPS:
            return self._vector(ins, pipe, env)
        raise InternalCompilerError(f"the timing model has no cost rule for {op!r} (`{ins}`)")

    def _dma(self, pipe: int, head: float, gm: Region, rate: float, name: str) -> Cost:
        eb = self.k.dtype_of(gm.tensor).bytes
        dims = [d for d in gm.dims if d.extent > 1]
        nbytes = gm.count * eb
        rows = 1
        if len(dims) > 1:  # a strided copy moves one burst per row unless rows abut
            inner = dims[-1].extent * dims[-1].stride
            rows = 1 if dims[-2].stride == inner and dims[-1].stride == 1 else gm.count // (
                dims[-1].extent)
        dur = head + max(rows * self.c.row_cycles if rows > 1 else 0.0, nbytes / rate)
        return Cost(pipe, KIND_DMA, dur, name=name, gm_bytes=nbytes)

    def _vector(self, ins: Instr, pipe: int, env: dict[str, int]) -> Cost:
        c = self.c
        dst = ins.writes[0]
        dt = max((self.k.dtype_of(x.tensor) for x in ins.writes + ins.reads),
                 key=lambda d: d.bytes)
        fn = str(ins.attr("fn", "")) or {"vec_dup": "dup", "vec_cast": "cast",
                                          "vec_brcb": "brcb", "vec_select": "select"}[ins.op]
        if ins.op == "vec_reduce":
            fn = "sum" if fn == "sum" else f"{fn}_reduce"
            repeats = ins.reads[0].dims[0].extent
        elif ins.op == "vec_block_reduce":
            fn = f"block_{fn}"
            repeats = ins.reads[0].dims[0].extent
        elif ins.op == "vec_brcb":
            repeats = max(1, ins.reads[0].dims[0].extent // self.k.target.brcb_elems_per_repeat)
        elif ins.op == "vec_cmp":
            fn = "cmp"
            repeats = ins.reads[0].dims[0].extent
        else:
            repeats = dst.dims[0].extent if len(dst.dims) > 1 else 1
        slope = c.slope(fn, dt.name)
        beats = self._bank_beats(ins, env, repeats)
        if beats:
            slope = sum(max(slope, 1.0 + (b - 1) * c.bank_beat) for b in beats) / len(beats)
        return Cost(pipe, KIND_VEC, slope * repeats, head=c.vec_head, tail=c.vec_tail,
                    name=f"{ins.op} {fn} {dst.tensor}", repeats=repeats)

    def _bank_beats(self, ins: Instr, env: dict[str, int], repeats: int) -> list[int]:
        """Per repeat, the most 32 B blocks any UB bank group must deliver to the sources
        (``lower/bank_groups.py``); [] when there are fewer than two UB sources."""
        srcs = [x for x in ins.reads if self.k.scope_of(x.tensor) == Scope.UB]
        if len(srcs) < 2:
            return []
        feet = []
        for reg in srcs:
            addr = self._ub_address(ins, reg, env)
            if addr is None:
                return []
            feet.append(footprint(reg, addr, self.k.dtype_of(reg.tensor).bytes))
        key = (tuple(feet), repeats)  # instances of a loop meet few distinct addresses
        got = self._beats.get(key)
        if got is None:
            got = self._beats[key] = beats(feet, repeats, self.k.target.block_bytes,
                                           self.c.ub_bank_groups)
        return got

    def _ub_address(self, ins: Instr, reg: Region, env: dict[str, int]) -> int | None:
        buf = self.k.buffer_map.get(reg.tensor)
        if buf is None:
            return None
        if not bank_invariant(reg, buf.offsets, buf.dtype.bytes, self._period()):
            self.variant.add(ins.id)
        base = 0 if buf.offsets is None else buf.offsets[reg.copy.evaluate(env)]
        return base + reg.offset.evaluate(env) * buf.dtype.bytes

    def _period(self) -> int:
        return self.c.ub_bank_groups * self.k.target.block_bytes
