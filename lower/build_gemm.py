"""GEMM schedule -> AIC kernel IR: the Cube path's tile loops (no syncs, no addresses yet).

Each class of equal tiles (interior, M edge, N edge, corner; the last swizzle strip) gets
its own persistent loop over the cores (``tile_loops.py``, as a bound Vector loop and its
tail do), so loop bodies are straight-line code; the body of
one output tile (its K steps: copies, loads, Mmads, the Fixpipe) is the Cube instruction
selector's (``select_cube.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

from ascendsched import dtypes as dt
from ascendsched.errors import InternalCompilerError, UnsupportedError
from ascendsched.lower.affine import Affine
from ascendsched.lower.cube_hints import bias_table_error
from ascendsched.lower.cube_l0_loads import round_up
from ascendsched.lower.cube_ops import (
    FIXPIPE_QUANT,
    FIXPIPE_VQUANT,
    MMAD_DTYPES,
    cube_c0,
)
from ascendsched.lower.fixpipe_quant import padded_words
from ascendsched.lower.ir import (
    Buffer,
    GmTensor,
    HostInput,
    Kernel,
    Program,
    Stmt,
)
from ascendsched.lower.select_cube import CubeTile, Tile
from ascendsched.lower.substitute import substitute
from ascendsched.lower.tile_loops import ClassRun, class_loop, class_run
from ascendsched.schedule.cube_plan import CubePlan
from ascendsched.schedule.gemm_records import GemmTiling, TileClass
from ascendsched.target import CoreType, Scope, Target

_QUANT = {("float32", "float16"): "F322F16", ("float32", "bfloat16"): "F322BF16",
          ("float32", "float32"): "NoQuant", ("int32", "int32"): "NoQuant"}


def build_gemm(sched: CubePlan, target: Target | None = None) -> Kernel:
    """Lower a GEMM schedule to an unsynchronised, unplanned AIC kernel."""
    return _Builder(sched, target or sched.target).build()


def class_runs(sched: CubePlan, target: Target | None = None, *, every_loop: bool = False
               ) -> tuple[ClassRun, ...]:
    """How each tile-class loop of ``build_gemm(sched)`` runs, in order, without building
    the kernel. ``every_loop``: a class of one trip keeps its loop variable too, as
    ``build_mixed`` keeps its loop."""
    return _Builder(sched, target or sched.target, every_loop=every_loop).class_runs()


# --------------------------------------------------------------------------- builder
RUN = "t"  # the running tile number in a tile's body before its class's value replaces it


class _Builder(CubeTile):
    def __init__(self, sched: CubePlan, target: Target, *, every_loop: bool = False) -> None:
        self.every_loop = every_loop  # whether a class of one trip keeps its loop
        self.s = sched
        self.t: GemmTiling = sched.tiling
        self.sp = sched.spec
        self.target = target
        sp = self.sp
        acc = MMAD_DTYPES.get((sp.in_dtype.name, sp.in_dtype.name))
        if acc is None:  # Mmad.md 表7 lists more pairs (float32 included) than are modelled
            raise UnsupportedError(
                f"{sp}: ascendsched's Cube path multiplies "
                + ", ".join(sorted({a for a, _ in MMAD_DTYPES}))
                + f" operands, not {sp.in_dtype}: give A and B one of those dtypes "
                "(e.g. float16 placeholders, accumulated in float32)")
        if acc != sp.acc_dtype.name:
            raise UnsupportedError(
                f"{sp}: the Cube unit multiplies {sp.in_dtype} into {acc}, not "
                f"{sp.acc_dtype}; supported: "
                + ", ".join(f"{a} -> {c}" for (a, _), c in MMAD_DTYPES.items()))
        epi = sp.epilogue
        self.scale = epi.scale
        self.bias = epi.bias
        bt = target.scope(Scope.BT).usable
        if self.bias is not None and self.t.tn * sp.acc_dtype.bytes > bt:
            raise bias_table_error(sched, target)
        q = _QUANT.get((sp.acc_dtype.name, sp.out_dtype.name))
        if self.scale is not None:  # the front end checked int32 -> float32 * scale -> float16
            q = "VDEQF16"
            if FIXPIPE_VQUANT[q] != (sp.acc_dtype.name, sp.out_dtype.name):
                raise InternalCompilerError(f"{sp}: VDEQF16 does not convert {sp.acc_dtype} "
                                            f"-> {sp.out_dtype}")
            if self.t.tn % self.target.cube_rows:
                raise InternalCompilerError(f"{sp}: tile n {self.t.tn} is not whole fractals")
        elif q is None or q not in FIXPIPE_QUANT:
            raise UnsupportedError(
                f"{sp}: Fixpipe cannot convert {sp.acc_dtype} to {sp.out_dtype}; outputs from "
                f"{sp.acc_dtype}: "
                + ", ".join(o for a, o in _QUANT if a == sp.acc_dtype.name))
        self.quant = q
        self.c0 = cube_c0(sp.in_dtype, self.target)
        self.f = self.target.cube_fractal_bytes // sp.in_dtype.bytes  # elements per fractal
        self.rows = self.target.cube_rows  # rows of a fractal (L0C fractals: rows x rows)
        self.int8 = sp.in_dtype.bytes == 1
        t = self.t
        self.k_full = sp.k // t.tk  # full L1 K steps
        self.k_tail = sp.k - self.k_full * t.tk  # K of the peeled last L1 step (0: none)
        self.steps = [t.kk] * self.k_full + ([-(-self.k_tail // t.k0)] if self.k_tail else [])
        # With several L0 steps per tile, each tile numbers its L0 copies from an even count,
        # so the L0 copy is the step within the tile mod 2 whatever the tile: with an odd
        # count, a running counter gives (kk + t) % 2, which no ping-pong flag id
        # (base + var % 2) follows, so those 'slot free' syncs fell back to one id and ran
        # the M -> MTE1 ids out. The price is one step per tile whose copy repeats the
        # previous one. One step per tile keeps the running t % 2 (a ping-pong over tiles).
        # The L1 counter stays running: rounding it too measured slower (300x200x360 tiled
        # 64x64x128 on 2 cores: 22.53 -> 23.57 us modelled).
        n = sum(self.steps)
        self.steps_per_tile = n + n % 2 if n > 1 else n

    # ----------------------------------------------------------------- driver
    def build(self) -> Kernel:
        sp, t = self.sp, self.t
        ind, acc, out = sp.in_dtype, sp.acc_dtype, sp.out_dtype
        buffers = (
            Buffer("a_l1", Scope.L1, ind, t.tm * t.tk, t.l1_copies, (t.tm, t.tk),
                   comment=f"A tile {'(K, M)' if sp.trans_a else '(M, K)'} nz"),
            Buffer("b_l1", Scope.L1, ind, t.tk * t.tn, t.l1_copies, (t.tk, t.tn),
                   comment=f"B tile {'(N, K)' if sp.trans_b else '(K, N)'} nz"),
            Buffer("a_l0", Scope.L0A, ind, t.tm * t.k0, t.l0_copies, (t.tm, t.k0),
                   comment="A slice Zz"),
            Buffer("b_l0", Scope.L0B, ind, t.k0 * t.tn, t.l0_copies, (t.k0, t.tn),
                   comment="B slice Zn"),
            Buffer("c_l0", Scope.L0C, acc, t.tm * t.tn, t.l0c_copies, (t.tm, t.tn),
                   comment="C tile Nz"),
        )
        if self.bias is not None:  # one tile's columns, whole 64 B bias-table blocks
            nb = round_up(t.tn, self.target.bias_block_bytes // acc.bytes)
            buffers += (
                Buffer("bias_l1", Scope.L1, acc, nb, 1, (nb,),
                       comment=f"bias[{t.tn}] of the tile's columns, ND"),
                Buffer("bias_bt", Scope.BT, acc, nb, 1, (nb,),
                       comment="bias table: Mmad's initial C row"))
        if self.scale is not None:  # one tile's quant words, whole 128 B (lower/fixpipe_quant.py)
            nq = padded_words(t.tn, self.target)
            buffers += (Buffer("quant_l1", Scope.L1, dt.uint64, nq, t.l0c_copies, (nq,),
                               comment=f"Fixpipe quant words of the tile's {t.tn} columns"),)
        ashape = (sp.k, sp.m) if sp.trans_a else (sp.m, sp.k)
        bshape = (sp.n, sp.k) if sp.trans_b else (sp.k, sp.n)
        cshape: tuple[int, ...] = (sp.m, sp.n)
        if sp.batched:
            ashape = (sp.batch,) + ashape
            if sp.b_batched:
                bshape = (sp.batch,) + bshape
            cshape = (sp.batch,) + cshape
        params = (GmTensor(sp.a, ashape, ind), GmTensor(sp.b, bshape, ind))
        if self.bias is not None:
            params += (GmTensor(self.bias, (sp.n,), acc),)
        if self.scale is not None:
            params += (GmTensor(self.scale, (padded_words(sp.n, self.target),), dt.uint64,
                                host=HostInput("fixpipe_quant", dt.float32, (sp.n,))),)
        params += (GmTensor(sp.c, cshape, out, "output"),)
        return Kernel.build(name=sp.name, params=params, buffers=buffers, block_dim=t.cores,
                            programs=(Program(CoreType.AIC, tuple(self._tiles())),),
                            target=self.target, notes=tuple(str(self.s).splitlines()))

    # ----------------------------------------------------------------- persistent loops
    def _tiles(self) -> list[Stmt]:
        """One persistent loop per tile class (schedule/gemm.py ``tile_classes``): tiles are
        numbered across the classes and tile ``T`` runs on core ``T % cores``, so every loop
        body is straight-line code with static sizes."""
        out: list[Stmt] = []
        for c, var, base in self._numbered():
            out.extend(self._class_loop(c, var, base))
        return out

    def _numbered(self) -> Iterator[tuple[TileClass, str, int]]:
        """Each tile class with its loop variable and the number of its first tile."""
        classes = self.s.tile_classes
        base = 0
        for n, c in enumerate(classes):
            yield c, "t" if len(classes) == 1 else f"t{n}", base
            base += self.sp.batch * c.rows * c.cols

    def _class_loop(self, c: TileClass, var: str, base: int) -> list[Stmt]:
        run = self.class_run(c, var, base)
        idx = run.tile(self.t.cores)
        per = c.rows * c.cols
        b = idx.floordiv(per) if self.sp.batch > 1 else Affine()
        r = idx.modulo(per) if self.sp.batch > 1 else idx
        mi, ni = c.coords(r) if per > 1 else (Affine(), Affine())
        # the tile's copies from "t", the core's running tile number
        tile = Tile(b, _aff(mi) + c.m0, _aff(ni) + c.n0, Affine.of(RUN), c.mv, c.nv)
        body = substitute(tuple(self._tile_body(tile)), {RUN: run.run})
        return self._loop(c, run, body)

    def _loop(self, c: TileClass, run: ClassRun, body: tuple[Stmt, ...]) -> list[Stmt]:
        """Class ``c``'s loop around the body of its tile (``tile_loops.class_loop``)."""
        what = self._what(c, run)
        return class_loop(run, self.t.cores, body, f"persistent over {what}",
                          f"{what}: tile < {run.count}" if run.iters > 1 else
                          f"{what}: the cores with a tile")

    def _what(self, c: TileClass, run: ClassRun) -> str:
        """What class ``c``'s loop runs, for its comment."""
        unit = "" if self.s.row_blocks else " tiles" if run.count > 1 else " tile"
        return (f"{c.label}: {run.count}{unit} of "
                f"{c.mv} x {c.nv}"
                + (f", swizzle({c.width}, {c.direction!r})" if c.width > 1 else ""))

    def class_runs(self) -> tuple[ClassRun, ...]:
        """How each tile class's loop runs (``_tiles``' order), without building it."""
        return tuple(self.class_run(c, var, base) for c, var, base in self._numbered())

    def class_run(self, c: TileClass, var: str, base: int) -> ClassRun:
        """Class ``c``'s loop over ``var``, its tiles numbered from ``base`` across the
        classes (tile ``T`` runs on core ``T % cores``)."""
        return class_run(self.sp.batch * c.rows * c.cols, base, self.t.cores, self.t.tiles,
                         var, every_loop=self.every_loop)


def _aff(x: Affine | int) -> Affine:
    return Affine.of(x) if isinstance(x, int) else x
