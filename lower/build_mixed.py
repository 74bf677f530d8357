"""GEMM schedule with a Vector epilogue -> one mixed kernel: an AIC and an AIV program.

The AIC program is the Cube path's (``build_gemm.py``) with each L0C tile written by the
Fixpipe, unconverted, into a GM workspace slot instead of the output (with the steps a split
epilogue keeps on the Cube core: a bias from the bias table, ReLU on the Fixpipe). The AIV program walks
the same tiles in the same loops (one persistent loop per tile class, the same guard) and per
tile runs the Vector part of the algorithm (``algo/gemm_vector_epilogue.py``) at that tile's
size, lowered by the Vector path (``build_loop_nest``) and moved to the tile: its workspace
reads to the slot, its other GM accesses to the tile's rows and columns. Per block::

    AIC: for t in 0..iters:  if tile < count:  ...Mmad...; [FIX] fixpipe ws[slot] <- c_l0
    AIV: for t in 0..iters:  if tile < count:  [MTE2] ws[slot] -> UB; vector epilogue;
                                               [MTE3] UB -> D tile

with ``slot = (iteration of the block, over all classes) mod copies``. No cross-core flags
yet: ``cross_core_sync.py`` derives them from the workspace dependences of the two programs.

An N edge (a tile narrower than the interior's) of an epilogue without row reductions is
lowered at the interior's columns, its UB tiles laid out as the interior's, and only its own
columns moved to and from GM (``_tile_epilogue``: DataCopyPad rows of its width at the
interior's UB pitch); the lanes past them compute on what UB holds there and are never
stored. Its AIV body is then the interior's but for those moves, which lets the sync steps
analyse the interior alone (``class_mirror.py``).

Row blocks (``CubePlan.row_blocks``): an epilogue that reduces along rows wider than the Cube
tile (softmax over 4096 scores, tiles of 256 columns) needs every tile of its rows first. An
iteration is then a *row block*: the AIC runs the block's tiles one after the other (a loop
over full-width tiles, then the N tail's), each Fixpipe writing its columns of the one slot;
the AIV runs the epilogue over the whole block, rows UB cannot hold read in chunks
(``_chunked_rows``). The flags stay one per iteration, so the Cube computes block ``i + 1``
while the Vector cores finish block ``i``::

    AIC: for t:  if block < count:  for nj: ...Mmad...; [FIX] ws[slot][:, nj*tn] <- c_l0
    AIV: for t:  if block < count:  epilogue over ws[slot] (rows x N) -> D rows

AIC:AIV 1:2 (``epilogue_on('vector', vector_cores=2)``, the default; ``KERNEL_TYPE_MIX_AIC_1_2``):
both Vector cores of a block run the AIV program, and ``sub_block_idx`` (GetSubBlockIdx())
picks each one's rows of every tile as CATLASS's epilogues do (include/catlass/epilogue/block/
block_epilogue_elemwise_no_source.hpp: ``CeilDiv(rows, GetSubBlockNum())`` rows per sub-block,
the last one clipped): rows ``[0, h)`` on sub-block 0 and ``[h, m)`` on 1, ``h = ceil(m / 2)``.
Equal halves share one body placed at ``sub_block_idx * h``; unequal ones (odd ``m``) get one
body each under ``if sub_block_idx == s`` (exclusive branches: their UB is shared), and a
tile of one row leaves sub-block 1 nothing but the flags. Whole rows stay on one core, so
row reductions (softmax) need nothing more; UB tiles and the Vector steps are per half.
``vector_cores=1`` keeps one AIV per block (``KERNEL_TYPE_MIX_AIC_1_1``).
"""

from __future__ import annotations

from dataclasses import replace

from ascendsched.algo.algorithm import Algorithm
from ascendsched.algo.gemm_vector_epilogue import VectorEpilogue
from ascendsched.errors import CapacityError, InternalCompilerError, ScheduleError
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.build_gemm import _Builder as _GemmBuilder
from ascendsched.lower.build_loop_nest import build_loop_nest
from ascendsched.lower.cube_hints import narrower_tile, where
from ascendsched.lower.cube_ops import make_cube_instr
from ascendsched.lower.ir import (
    BLOCK_IDX,
    SUB_BLOCK_IDX,
    Buffer,
    Dim,
    For,
    GmTensor,
    If,
    Instr,
    Kernel,
    Program,
    Region,
    Stmt,
    copied,
)
from ascendsched.lower.lifetimes import buffer_lifetimes
from ascendsched.lower.plan_memory import fits_as_scheduled
from ascendsched.lower.select_cube import Tile
from ascendsched.lower.tile_loops import ClassRun, class_loop
from ascendsched.schedule.cube_plan import CubePlan
from ascendsched.schedule.epilogue_steps import default_step_rows, even_steps, step_fits
from ascendsched.schedule.gemm_records import TileClass
from ascendsched.schedule.schedule import Schedule
from ascendsched.schedule.ub_budget import computed_per_tile
from ascendsched.target import CoreType, Scope, Target


def build_mixed(sched: CubePlan, target: Target | None = None) -> Kernel:
    """Lower a GEMM schedule whose epilogue runs on the Vector cores to an unsynchronised,
    unplanned mixed kernel (module docstring)."""
    epi = sched.vector_epilogue
    if epi is None:
        raise InternalCompilerError(f"build_mixed: {sched.spec} has no Vector epilogue")
    target = target or sched.target
    sw = sched.tiling.swizzle
    if sched.row_blocks and sw.width > 1:
        raise ScheduleError(
            f"{where(sched)}: swizzle({sw.width}, {sw.direction!r}) orders the tiles across "
            f"the cores, but the Vector epilogue reduces rows (stage '{epi.rowwise[0]}') of "
            f"{sched.spec.n} columns, wider than the tile n={sched.tiling.tn}, so each core "
            f"takes whole row blocks, their tiles one after the other: drop the swizzle, or "
            f"make the tile hold whole rows")
    cube = _CubeBuilder(sched, target)
    aic = cube.build()
    aiv_body: list[Stmt] = []
    buffers: dict[str, Buffer] = {}
    multi = len(cube.classes) > 1
    subs = sched.epilogue_vector_cores
    for n, tc in enumerate(cube.classes):
        halves = row_halves(tc.cls.mv, subs)
        body: tuple[Stmt, ...] = ()
        for h, (row0, rows, conds) in enumerate(halves):
            suffix = (f"_{n}" if multi else "") + (f"_h{h}" if len(halves) > 1 else "")
            part, vk = _tile_epilogue(sched, epi, rows, tc, cube, suffix, row0, target)
            for b in vk.buffers:
                buffers[b.name + suffix] = replace(b, name=b.name + suffix)
            body += (If(conds, part, f"sub-block {h}: {rows} rows of the tile "
                     f"from row {row0} of {tc.cls.mv}"),) if conds else part
        aiv_body.append(tc.wrap(body))
    sp, t = cube.sp, cube.t
    out = epi.algo.outputs[0]
    params = tuple(p for p in aic.params if p.kind == "input")
    params += tuple(GmTensor(i.name, tuple(epi.algo.tensor(i.name).shape),  # type: ignore[arg-type]
                             epi.algo.tensor(i.name).dtype)
                    for i in epi.inputs if i.name != epi.workspace)
    params += (GmTensor(out.name, tuple(out.shape), out.dtype, "output"),  # type: ignore[arg-type]
               GmTensor(epi.workspace, (t.cores * cube.slots, slot_elements(sched)),
                        sp.acc_dtype, "workspace"))
    return Kernel.build(
        name=sched.algo.name, params=params, buffers=aic.buffers + tuple(buffers.values()),
        block_dim=t.cores, target=target, notes=aic.notes,
        programs=(aic.program(CoreType.AIC), Program(CoreType.AIV, tuple(aiv_body))),
        sub_blocks=subs)


def build_mixed_cube(sched: CubePlan, target: Target | None = None) -> Kernel:
    """The AIC side of ``build_mixed(sched)`` alone: the GEMM with its Fixpipe writing the
    workspace slots (its params: the GEMM's inputs and output; the workspace is the mixed
    kernel's). ``sync_template.py`` builds its template with it."""
    return _CubeBuilder(sched, target or sched.target).build()


def row_halves(rows: int, subs: int) -> list[tuple[Affine, int, tuple[Cond, ...]]]:
    """How the ``subs`` Vector cores of a block split a tile of ``rows`` rows: per body, its
    first row (affine in ``sub_block_idx``), its rows, and the condition selecting its
    sub-block (none when every sub-block runs it). Module docstring."""
    if subs == 1:
        return [(Affine(), rows, ())]
    h = -(-rows // subs)
    rest = rows - (subs - 1) * h
    if rest == h:
        return [(Affine.of(SUB_BLOCK_IDX) * h, h, ())]
    out = [(Affine(s * h), h, (Cond(Affine.of(SUB_BLOCK_IDX), "==", s),))
           for s in range(subs - 1)]
    if rest > 0:  # else the last sub-block has no rows of this tile: only its flags run
        out.append((Affine((subs - 1) * h), rest,
                    (Cond(Affine.of(SUB_BLOCK_IDX), "==", subs - 1),)))
    return out


def epilogue_schedule(sched: CubePlan, epi: VectorEpilogue, rows: int, cols: int,
                      target: Target) -> Schedule:
    """The Vector schedule of one ``rows x cols`` tile of the epilogue: its stages inlined
    into the output (row reductions and stages read twice computed per step, as the default
    Vector schedule does), the rows split by ``epilogue_on(..., rows=r)`` (default: the most rows
    whose UB tiles fit, evened out over the steps that takes: ``schedule/epilogue_steps.py``,
    double buffered when a tile takes several steps). Rows under a row reduction that UB cannot hold even one
    at a time are read in chunks (``_chunked_rows``)."""
    return _epilogue(sched, epi, rows, cols, target)[0]


def _epilogue(sched: CubePlan, epi: VectorEpilogue, rows: int, cols: int, target: Target
              ) -> tuple[Schedule, Kernel]:
    """``epilogue_schedule`` and its tile kernel (built once: the planner check that steps
    the rows down asks it of the same kernel)."""
    algo = epi.tile_algorithm(rows, cols)
    out = algo.outputs[0].name
    usable = target.scope(Scope.UB).usable
    want = sched.epilogue_rows
    if want is None:
        r = default_step_rows(algo, rows, cols, target)
        if r == 0 and epi.rowwise:
            s = _chunked_rows(algo, target)
            return s, build_loop_nest(s, target)
        if r == 0:
            raise CapacityError(
                f"{where(sched)}: one row of the Vector epilogue's tile ({cols} columns of "
                f"{', '.join(i.name for i in epi.inputs)} and {out}) does not fit the "
                f"{target.name} UB ({usable} B); try {narrower_tile(sched)}")
    elif epi.rowwise and not step_fits(algo, 1, cols, 1, target):
        raise CapacityError(
            f"{where(sched)}: one row of the Vector epilogue's tile ({cols} columns of "
            f"{', '.join(i.name for i in epi.inputs)} and {out}) does not fit the "
            f"{target.name} UB ({usable} B), so the epilogue reads its rows in chunks, one "
            f"row at a time, not {want} rows per step: drop rows={want} from "
            f".epilogue_on('vector', ...)")
    else:
        r = min(want, rows)
    s = _in_steps(algo, r, target)
    k = build_loop_nest(s, target)
    # the estimate can fit more rows than the planner does with both copies apart: fewer
    # rows per step until it does (GEMM + softmax in row blocks of 16 x 2500 per Vector
    # core: 3 rows estimated, 200 992 B of UB planned for 188 160)
    while want is None and 1 < r < rows and not fits_as_scheduled(
            k, buffer_lifetimes(k), target):
        r = even_steps(rows, r - 1)
        s = _in_steps(algo, r, target)
        k = build_loop_nest(s, target)
    return s, k


def _in_steps(algo: Algorithm, r: int, target: Target) -> Schedule:
    """``epilogue_schedule`` of ``r`` rows per step."""
    out = algo.outputs[0].name
    s = Schedule(algo, target=target)
    if r < int(algo.outputs[0].shape[-2]):
        s = s.split(out, algo.outputs[0].op.axes[-2].name, r)  # type: ignore[union-attr]
        for t in _tensors(algo):
            s = s.buffer(t, 2)
    per_tile = computed_per_tile(algo)  # row reductions and shared stages: per step
    for st in algo.stages:
        if st.name != out:
            s = s.compute_at(st.name, out, s.legal_compute_at(out)[0]) \
                if st.name in per_tile else s.compute_inline(st.name)
    return s


def _chunked_rows(algo: Algorithm, target: Target) -> Schedule:
    """The epilogue of rows UB cannot hold: the Vector path's default schedule of the tile
    for one Vector core (its row statistics reduced in chunks, each reading the row again
    from the workspace: ``schedule/default_chunked.py``), the one whose buffers the planner
    fits."""
    from ascendsched.lower.schedule_for import schedule_for  # it lowers, through this module

    one = replace(target, num_aiv=1)  # the tile is this core's: no binding to cores
    s = schedule_for(algo, one)
    assert isinstance(s, Schedule)
    return replace(s, target=target)


def _tensors(algo: Algorithm) -> list[str]:
    return [t.name for t in algo.inputs] + [o.name for o in algo.outputs]


# --------------------------------------------------------------------------- the Cube side
class _ClassLoop:
    """One tile class as both programs run it: its loop (``tile_loops.ClassRun``, one trip
    included), tile, and the dense iteration number (over all classes) of its first
    trip."""

    def __init__(self, cls: TileClass, run: ClassRun, cores: int, base: int, unit: str,
                 what: str) -> None:
        self.cls, self.run, self.cores, self.base = cls, run, cores, base
        self.what = what  # what the loop runs, for its comment
        self.var, self.iters = run.var, run.iters
        self.unit = unit  # "tile" or "row block"
        self.tile: Tile | None = None

    def wrap(self, body: tuple[Stmt, ...]) -> For:
        loop = class_loop(self.run, self.cores, body, f"persistent over {self.what}",
                          f"{self.cls.label}: {self.unit} exists")
        assert len(loop) == 1 and isinstance(loop[0], For)
        return loop[0]


class _CubeBuilder(_GemmBuilder):
    """``build_gemm``'s builder with the Fixpipe writing workspace slots, each class loop
    kept as a loop (one trip included) so both programs share the loop skeleton. On-chip
    copies follow the core's running tile number as in ``build_gemm``; the workspace slot
    follows the dense iteration over the class loops (``slot_base``), as the AIV numbers it."""

    def __init__(self, sched: CubePlan, target: Target) -> None:
        super().__init__(sched, target, every_loop=True)
        self.slots = sched.copies("workspace")
        self.ws = sched.vector_epilogue.workspace  # type: ignore[union-attr]
        self.classes: list[_ClassLoop] = []
        self.iters_total = 0

    def _class_loop(self, c: TileClass, var: str, base: int) -> list[Stmt]:
        # the class's loop is known before its tile body is made: the body's Fixpipe
        # writes the slot of this class's iteration (slot_base)
        run = self.class_run(c, var, base)
        cl = _ClassLoop(c, run, self.t.cores, self.iters_total,
                        "row block" if self.s.row_blocks else "tile", self._what(c, run))
        self.classes.append(cl)
        self.iters_total += cl.iters
        return super()._class_loop(c, var, base)

    def _loop(self, c: TileClass, run: ClassRun, body: tuple[Stmt, ...]) -> list[Stmt]:
        return [self.classes[-1].wrap(body)]

    def _tile_body(self, tile: Tile) -> list[Stmt]:
        self.classes[-1].tile = tile
        if not self.s.row_blocks:
            return super()._tile_body(tile)
        # a row block: its tiles one after the other, each numbered for the on-chip copies
        # by the core's running tile count (row blocks so far times tiles per block, plus
        # its column), all into the iteration's one workspace slot
        t, n = self.t, self.sp.n
        nfull, ntail = divmod(n, t.tn)
        run = tile.t * t.nt
        out: list[Stmt] = []
        if nfull > 1:
            j = Affine.of("nj")
            body = super()._tile_body(replace(tile, ni=j, t=run + j, nv=t.tn))
            out.append(For("nj", nfull, tuple(body), f"the row block's {nfull} tiles of "
                           f"{tile.mv} x {t.tn}"))
        elif nfull == 1:
            out += super()._tile_body(replace(tile, ni=Affine(), t=run, nv=t.tn))
        if ntail:
            out += super()._tile_body(replace(tile, ni=Affine(nfull), t=run + nfull,
                                              nv=ntail))
        return out

    def slot_base(self, cl: _ClassLoop) -> Affine:
        """Element offset of this iteration's workspace slot (a tile, or a row block)."""
        t = self.t
        it = (Affine.of(cl.var) if cl.iters > 1 else Affine()) + cl.base
        slot = it.modulo(self.slots) if self.slots > 1 else Affine()
        blk = Affine.of(BLOCK_IDX) if t.cores > 1 else Affine()
        return (blk * self.slots + slot) * slot_elements(self.s)

    def _fixpipe(self, tile: Tile, ccopy: Affine) -> list[Stmt]:
        sp = self.sp
        mp = -(-self._mmad_mn(tile)[0] // self.rows) * self.rows
        cl = self.classes[-1]
        # the slot holds the iteration's tile (row block) densely: rows of its valid columns
        at = self.slot_base(cl) + (tile.ni * self.t.tn if self.s.row_blocks else 0)
        return [make_cube_instr(
            "fixpipe", ((self.ws, at, 0, sp.acc_dtype),
                        ("c_l0", 0, ccopy, sp.acc_dtype)),
            target=self.target, comment=f"C tile {tile.mv} x {tile.nv} -> workspace slot "
            f"(NZ -> ND, {sp.acc_dtype}" + (", ReLU" if sp.epilogue.relu else "")
            + ", for the Vector epilogue)",
            nSize=tile.nv, mSize=tile.mv, srcStride=mp, dstStride=cl.cls.nv,
            quantPre=self.quant, reluEn=sp.epilogue.relu, unitFlag=0, ndNum=1, srcNdStride=0,
            dstNdStride=0)]


def slot_elements(plan: CubePlan) -> int:
    """Elements of one workspace slot: a tile, or a row block of ``nt`` tiles."""
    t = plan.tiling
    return t.tm * t.tn * (t.nt if plan.row_blocks else 1)


# --------------------------------------------------------------------------- the Vector side
def _tile_epilogue(sched: CubePlan, epi: VectorEpilogue, rows: int, cl: _ClassLoop,
                   cube: _CubeBuilder, suffix: str, row0: Affine, target: Target
                   ) -> tuple[tuple[Stmt, ...], Kernel]:
    """The epilogue of ``rows`` rows of class ``cl``'s tile (from ``row0``) and its tile
    kernel. An N edge of an epilogue without row reductions computes at the full tile's
    columns, its UB tiles laid out as the interior's, and moves only its own columns to and
    from GM (DataCopyPad rows of its width at the interior's UB pitch): its AIV body is the
    interior's but for those moves, so it mirrors the first class's (``class_mirror``); the
    lanes past its columns compute on what UB holds there and are never stored. Where a GM
    move does not span the tile's columns, the edge computes at its own width."""
    full = cube.t.tn
    if not epi.rowwise and cl.cls.nv < full:
        _, vk = _epilogue(sched, epi, rows, full, target)
        try:
            return _relocated(copied(vk.program(CoreType.AIV).body), vk, epi, cl, cube,
                              suffix, row0, clip=cl.cls.nv), vk
        except _Unclipped:
            pass
    _, vk = _epilogue(sched, epi, rows, cl.cls.nv, target)
    return _relocated(copied(vk.program(CoreType.AIV).body), vk, epi, cl, cube, suffix,
                      row0), vk


class _Unclipped(Exception):
    """A GM move of a padded tile kernel that does not span the tile's columns."""


def _relocated(body: tuple[Stmt, ...], vk: Kernel, epi: VectorEpilogue, cl: _ClassLoop,
               cube: _CubeBuilder, suffix: str, row0: Affine, clip: int | None = None
               ) -> tuple[Stmt, ...]:
    """The tile kernel's body (of the rows from ``row0`` of the tile on) moved to the class's
    tile: GM regions of the workspace to this iteration's slot, of the other tensors to the
    tile's rows and columns; buffers renamed with ``suffix``; loop variables must not meet the
    class loop's. ``clip``: the tile kernel is wider than the tile (``_tile_epilogue``): each
    GM move along the columns takes the first ``clip`` of them, both sides (``_Unclipped``
    where one does not span them all)."""
    tile = cl.tile
    assert tile is not None
    t = cube.t
    origin = (tile.mi * t.tm + row0, tile.ni * t.tn)
    if epi.rank == 3:
        origin = (tile.b,) + origin
    follows = {i.name: i.axes for i in epi.inputs}
    follows[epi.output] = tuple(range(epi.rank))
    glob = {p.name: p for p in (GmTensor(n, tuple(epi.algo.tensor(n).shape),  # type: ignore[arg-type]
                                         epi.algo.tensor(n).dtype) for n in follows)}

    def spans(r: Region, idx: list[Affine], cols: int) -> None:
        if len(r.dims) > 2 or idx[-1] != Affine() or r.dims[-1].extent != cols:
            raise _Unclipped(r)

    def region(r: Region, extents: dict[str, int]) -> Region:
        if r.tensor in vk.buffer_map:
            return replace(r, tensor=r.tensor + suffix)
        local = vk.param_map[r.tensor]
        if r.tensor == epi.workspace:  # the slot holds the tile densely (rows of its n)
            if clip is None:
                return replace(r, offset=r.offset + cube.slot_base(cl) + row0 * tile.nv)
            if len(local.shape) != 2:
                raise _Unclipped(r)
            idx = _split_offset(r, local.shape, extents)
            spans(r, idx, int(local.shape[-1]))
            rows = (Dim(r.dims[0].extent, clip),) if len(r.dims) == 2 else ()
            return Region(r.tensor, cube.slot_base(cl) + (row0 + idx[0]) * clip,
                          rows + (Dim(clip, 1),), r.copy)
        idx = _split_offset(r, local.shape, extents)
        g = glob[r.tensor]
        gstr = [1] * len(g.shape)
        for d in range(len(g.shape) - 2, -1, -1):
            gstr[d] = gstr[d + 1] * int(g.shape[d + 1])
        off = Affine()
        for d, part in enumerate(idx):
            off = off + (origin[follows[r.tensor][d]] + part) * gstr[d]
        dims = r.dims if len(g.shape) == 1 else (Dim(r.dims[0].extent, gstr[-2]), r.dims[1])
        if clip is not None and follows[r.tensor][-1] == epi.rank - 1:  # along the columns
            spans(r, idx, int(local.shape[-1]))
            dims = dims[:-1] + (Dim(clip, dims[-1].stride),)
        return Region(r.tensor, off, dims, r.copy)

    def clipped(r: Region) -> Region:  # the UB side of a move ``region`` clipped
        return replace(r, dims=r.dims[:-1] + (Dim(clip, r.dims[-1].stride),)) \
            if clip is not None and r.tensor not in vk.param_map else r

    def walk(stmts: tuple[Stmt, ...], extents: dict[str, int]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in stmts:
            if isinstance(s, For):
                if s.var == cl.var:
                    raise InternalCompilerError(f"epilogue loop {s.var} clashes with the tile "
                                                f"loop of {cl.cls.label}")
                out.append(replace(s, body=walk(s.body, {**extents, s.var: s.extent})))
            elif isinstance(s, If):
                out.append(replace(s, body=walk(s.body, extents)))
            else:
                assert isinstance(s, Instr)
                writes = tuple(region(r, extents) for r in s.writes)
                reads = tuple(region(r, extents) for r in s.reads)
                if any(a.dims[-1].extent != b.dims[-1].extent and a.tensor not in vk.buffer_map
                       for a, b in zip(s.writes + s.reads, writes + reads)):
                    writes, reads = tuple(map(clipped, writes)), tuple(map(clipped, reads))
                    s = replace(s, comment=f"{s.comment} ({clip} columns of the interior's "
                                           f"{t.tn}: the edge computes at its width)")
                out.append(replace(s, writes=writes, reads=reads))
        return tuple(out)

    return walk(body, {})


def _split_offset(r: Region, shape: tuple[int, ...], extents: dict[str, int]) -> list[Affine]:
    """A tile-local GM region's element offset as an index per dimension (row-major
    ``shape``), checked to keep each index below its dimension for every loop value (the
    region's rows along the second-to-last, its columns along the last)."""
    if r.offset.mods or r.offset.divs:
        raise InternalCompilerError(f"epilogue region {r}: offset is not a plain affine sum")
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * int(shape[d + 1])
    idx, hi = [], []
    const = r.offset.const
    terms = dict(r.offset.terms)
    for st in strides:
        q, const = divmod(const, st)
        part, top = Affine(q), q
        for v, c in list(terms.items()):
            qv, terms[v] = divmod(c, st)
            part = part + Affine.of(v) * qv
            top += qv * (extents.get(v, 1) - 1)
        idx.append(part)
        hi.append(top)
    span = [d.extent for d in r.dims[-len(shape):]] if len(r.dims) >= len(shape) else \
        [1] * (len(shape) - len(r.dims)) + [d.extent for d in r.dims]
    for d, n in enumerate(shape):
        if hi[d] + span[d] > int(n):
            raise InternalCompilerError(f"epilogue region {r}: dimension {d} reaches "
                                        f"{hi[d] + span[d]} > {n}; the offset does not split "
                                        f"into the tensor's dimensions")
    return idx
