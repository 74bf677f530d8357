"""lower/compare.py: kernels equal up to sizes pass; any other difference is named."""

from dataclasses import replace

import pytest

from ascendsched.algo import library as L
from ascendsched.lower.affine import Affine, Cond
from ascendsched.lower.compare import affine_form, structural_diff
from ascendsched.lower.ir import For, If, Instr, Kernel, StmtMutator, iter_instrs
from ascendsched.lower.pipeline import lower
from ascendsched.lower.sync_ir import Barrier, SetFlag, WaitFlag
from ascendsched.schedule import Schedule
from ascendsched.target import Pipe


@pytest.fixture(scope="module")
def kernel() -> Kernel:
    """vadd on 2 cores with 9 full tiles (a guard), a tail tile and double buffering: loops,
    guards, versions, syncs."""
    s = Schedule(L.vadd(2048 * 9 + 1808)).split("z", "i", 2048).bind("z", "i_o", 2) \
        .buffer("x").buffer("y").buffer("z")
    return lower(s)


class _Edit(StmtMutator):
    def __init__(self, fn) -> None:
        self.fn, self.done = fn, False

    def visit_Instr(self, s: Instr):
        if not self.done:
            new = self.fn(s)
            if new is not None:
                self.done = True
                return new
        return (s,)


def _edit(k: Kernel, fn) -> Kernel:
    ed = _Edit(fn)
    out = k.replace_body(k.programs[0].core, ed.visit_body(k.programs[0].body))
    assert ed.done
    return out


def _sizes_changed(k: Kernel) -> Kernel:
    """Loop extents, guard constants, GM offsets' numbers, GM shapes and block_dim changed."""

    class Resize(StmtMutator):
        def visit_For(self, s: For):
            return (For(s.var, s.extent + 7, self.visit_body(s.body), "other comment"),)

        def visit_If(self, s: If):
            conds = tuple(Cond(c.lhs * 3 + 1, c.op, c.rhs + 5) for c in s.conds)
            return (If(conds, self.visit_body(s.body)),)

        def visit_Instr(self, s: Instr):
            def gm(rs):
                return tuple(replace(r, offset=r.offset * 5 + 3) if r.tensor in "xyz" else r
                             for r in rs)
            return (replace(s, writes=gm(s.writes), reads=gm(s.reads), comment="x"),)

    params = tuple(replace(t, shape=(99,)) for t in k.params)
    body = Resize().visit_body(k.programs[0].body)
    return replace(k.replace_body(k.programs[0].core, body), params=params, block_dim=7)


def test_same_kernel_and_kernel_with_other_sizes_pass(kernel):
    assert structural_diff(kernel, kernel) is None
    assert structural_diff(kernel, _sizes_changed(kernel)) is None


def test_event_id_difference_is_named(kernel):
    def other_id(s: Instr):
        if isinstance(s, WaitFlag) and s.event_id != Affine():
            return (replace(s, event_id=Affine()),)
        return None

    msg = structural_diff(kernel, _edit(kernel, other_id))
    assert msg is not None and "event_id: full (i_o_k % 2), reduced 0" in msg
    assert msg.startswith("program AIV > #")


def test_pipe_op_buffer_and_placement_differences_are_named(kernel):
    barrier = Barrier(Pipe.V)
    cases = {
        "op or pipe": lambda s: (replace(s, pipe=Pipe.MTE1),) if isinstance(s, SetFlag) else None,
        "only the reduced kernel has barrier V": lambda s: (barrier, s)
        if s.op.startswith("vec_") else None,
        "on-chip offset": lambda s: (replace(s, writes=(replace(s.writes[0], offset=Affine(64)),),),)
        if s.op.startswith("vec_") else None,
        "copy": lambda s: (replace(s, reads=(replace(s.reads[0], copy=Affine()),)),)
        if s.op == "copy_ub_gm" else None,
    }
    for want, fn in cases.items():
        msg = structural_diff(kernel, _edit(kernel, fn))
        assert msg is not None and want in msg, (want, msg)


def test_moved_sync_is_a_difference(kernel):
    body = kernel.programs[0].body
    swapped = (body[1], body[0]) + body[2:]
    assert isinstance(body[0], SetFlag) and isinstance(body[1], SetFlag)
    assert str(body[0]) != str(body[1])
    msg = structural_diff(kernel, kernel.replace_body(kernel.programs[0].core, swapped))
    assert msg is not None and "#0 set_flag" in msg


def test_buffers_and_guard_forms_must_match(kernel):
    moved = replace(kernel, buffers=tuple(replace(b, offsets=tuple(o + 32 for o in b.offsets))
                                          if b.name == "z_ub" else b for b in kernel.buffers))
    assert "buffer z_ub" in structural_diff(kernel, moved)

    class OtherForm(StmtMutator):
        def visit_If(self, s: If):
            conds = tuple(Cond(Affine.of("block_idx"), c.op, c.rhs) for c in s.conds)
            return (If(conds, s.body, s.comment),)

    other = kernel.replace_body(kernel.programs[0].core,
                                OtherForm().visit_body(kernel.programs[0].body))
    assert "different form" in structural_diff(kernel, other)


def test_affine_form_ignores_numbers_only():
    a = Affine.of("k") * 4 + Affine.of("block_idx") * 2 + 8
    b = Affine.of("k") * 6 + Affine.of("block_idx") + 1
    assert affine_form(a) == affine_form(b)
    assert affine_form(a) != affine_form(Affine.of("k") * 4 + 8)
    assert affine_form((Affine.of("t") + 3).floordiv(5)) == affine_form(Affine.of("t").floordiv(7))
    assert affine_form(Affine.of("t").floordiv(5)) != affine_form(Affine.of("t"))


def test_first_k_step_conditions_differ_in_numbers_only():
    """The L1 K loop's Mmad tests "first K step" as a Cond over ``kk`` and ``kt``; the K tail
    step's L0 loop comes after the L1 steps, so the builder settles its test to false (it was
    ``kk + 12 == 0`` after 3 L1 steps of 4, ``kk + 20 == 0`` after 5). Such an attribute may
    differ in its numbers, not in its form."""
    from ascendsched.schedule.gemm import GemmSchedule

    def gemm(k: int) -> Kernel:
        return lower(GemmSchedule(L.gemm(32, 32, k)).tile(32, 32, 64).split_k(16))

    full, reduced = gemm(5 * 64 + 58), gemm(3 * 64 + 58)
    inits = [s.attr("cmatrixInitVal") for k in (full, reduced)
             for s, _ in iter_instrs(k.programs[0].body) if s.op == "mmad"]
    assert {str(c) for c in inits if isinstance(c, Cond)} == {"kk + 4*kt == 0"}
    assert inits.count(False) == 4  # the K tail step's L0 loop and partial step, per kernel
    assert structural_diff(full, reduced) is None

    def other_form(s: Instr):
        if not isinstance(s.attr("cmatrixInitVal"), Cond):
            return None
        attrs = tuple((k, Cond(Affine.of("kt") + 12, "==", 0) if k == "cmatrixInitVal" else v)
                      for k, v in s.attrs)
        return (replace(s, attrs=attrs),)

    msg = structural_diff(full, _edit(full, other_form))
    assert msg is not None and "mmad: cmatrixInitVal: condition: full `kk + 4*kt == 0`, " \
        "reduced `kt + 12 == 0` (different form" in msg


def _fused_layernorm(rows: int, cores: int) -> Kernel:
    """LayerNorm in 2 x 400 tiles of a fused loop bound to cores, beta staged once in UB: its
    column tile reads beta_ub at ``400*(t mod 5)`` of the fused tile number, whose IR numbers
    follow the core count."""
    s = (Schedule(L.layernorm(rows, 2000))
         .split("y", "i", 2).split("y", "j", 400).fuse("y", "i_o", "j_o", fused="i_o_j_o")
         .bind("y", "i_o_j_o", cores=cores).compute_inline("xf")
         .compute_at("mean", "y", "i_o_j_o").split("mean", "k", 400).compute_inline("d")
         .compute_at("var", "y", "i_o_j_o").split("var", "k2", 400)
         .compute_at("r", "y", "i_o_j_o").load_once("beta", hoist=False)
         .buffer("x", copies=2).buffer("gamma", copies=2).buffer("y", copies=2))
    return lower(s)


def _floor_offsets(k: Kernel) -> list:
    return [r.offset for s, _ in iter_instrs(k.programs[0].body) if isinstance(s, Instr)
            for r in s.reads if r.tensor == "beta_ub" and r.offset.divs]


def test_on_chip_offsets_with_floor_terms_may_differ_in_numbers():
    """The 77-row kernel on 24 cores and its reduced instance (7 rows on 7 cores) differ in the
    numbers of beta_ub's offsets and nowhere else; another form is a difference."""
    full, reduced = _fused_layernorm(77, 24), _fused_layernorm(7, 7)
    fo, ro = _floor_offsets(full), _floor_offsets(reduced)
    assert fo and len(fo) == len(ro) and all(a != b for a, b in zip(fo, ro))
    assert structural_diff(full, reduced) is None

    def edit(fn):
        def f(s: Instr):
            rs = tuple(replace(r, offset=fn(r.offset)) if r.tensor == "beta_ub" else r
                       for r in s.reads)
            return (replace(s, reads=rs),) if rs != s.reads else None
        return _edit(full, f)

    other_form = edit(lambda o: o + Affine.of("block_idx").floordiv(3) * 400)
    assert "on-chip offset" in structural_diff(full, other_form)


def test_on_chip_offsets_not_located_by_the_tile_number_must_be_equal(kernel):
    """x_ub's offsets name neither the core nor a floor term: other numbers are a
    difference."""
    def shifted(s: Instr):
        rs = tuple(replace(r, offset=r.offset + 64) if r.tensor == "x_ub" else r
                   for r in s.reads)
        return (replace(s, reads=rs),) if rs != s.reads else None

    msg = structural_diff(kernel, _edit(kernel, shifted))
    assert msg is not None and "on-chip offset" in msg
