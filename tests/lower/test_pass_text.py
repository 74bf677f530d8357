"""The main steps of ``lower/pipeline.py``, each on a small kernel: the printed IR before and
after, as expected text (TVM's ``before``/``expected`` tests, in our printer's syntax).

Each test runs ``lower(..., stop_after=)`` to the step before and to the step itself and
compares ``format_kernel``/``format_body`` text. When the printed form changes on purpose (a
sync instruction's spelling, say), print the new text with ``text(...)`` and paste it over the
expected string of the test: each expected text is one triple-quoted string.

Two kernels, both 4 tiles of 64 elements on one vector core:
- VADD, ``z = x + y`` with ``x`` double buffered: the ping-pong ids of ``x_ub``.
- MUL_ADD_RELU, ``d = relu(a * b + c)``, single buffered, two temporaries: the memory plan
  puts ``d_ub`` in ``a_ub``'s dead bytes and ``d_t2`` in ``d_t1``'s, and the two loads the
  vector unit waits for at different points get two event ids.
Where a sync's reasons (its trailing comment) would fill the line, ``comments=False`` drops
every trailing comment; the syncs' reasons are checked in ``test_sync.py``.
"""

from __future__ import annotations

from textwrap import dedent

from ascendsched.algo import library as L
from ascendsched.lower.ir import Kernel, format_body, format_kernel
from ascendsched.lower.pass_log import PassLog
from ascendsched.lower.pipeline import lower
from ascendsched.schedule import Schedule

VADD = Schedule(L.vadd(256)).split("z", "i", 64).buffer("x", 2)
MUL_ADD_RELU = Schedule(L.fused_mul_add_relu(256)).split("d", "i", 64)


def text(k: Kernel, *, comments: bool = True) -> str:
    """The programs of ``k`` as ``format_body`` prints them (one indent per level)."""
    lines = []
    for p in k.programs:
        lines.append(f"program {p.core}:")
        lines += format_body(p.body, 1)
    if not comments:
        lines = [line.split("   # ")[0] for line in lines]
    return "\n".join(lines)


def expect(s: str) -> str:
    return dedent(s).strip("\n")


def test_build_turns_the_schedule_into_a_loop_nest() -> None:
    assert str(VADD) == expect("""
        Schedule(vadd)
          .split('z', 'i', 64, outer='i_o', inner='i_i')
          .buffer('x', copies=2)
        """)
    assert format_kernel(lower(VADD, stop_after="build")) == expect("""
        kernel vadd  (target ascend910b, 1 blocks)
          # Schedule(vadd)
          #   .split('z', 'i', 64, outer='i_o', inner='i_i')
          #   .buffer('x', copies=2)
          gm input x: float16[256]
          gm input y: float16[256]
          gm output z: float16[256]
          UB x_ub: float16[64] x2   # tile of x (double buffered)
          UB y_ub: float16[64] x1   # tile of y
          UB z_ub: float16[64] x1   # tile of z
          program AIV:
            for i_o in 0..4:   # tiles of i (split by 64)
              [MTE2] copy_gm_ub  x_ub[copy (i_o % 2)]@(0)[1:64, 64:1] <- x@(64*i_o)[1:64, 64:1]   # load x tile into UB
              [MTE2] copy_gm_ub  y_ub@(0)[1:64, 64:1] <- y@(64*i_o)[1:64, 64:1]   # load y tile into UB
              [V] vec_binary fn=add  z_ub@(0)[1:128, 64:1] <- x_ub[copy (i_o % 2)]@(0)[1:128, 64:1], y_ub@(0)[1:128, 64:1]   # z: add
              [MTE3] copy_ub_gm  z@(64*i_o)[1:64, 64:1] <- z_ub@(0)[1:64, 64:1]   # store z tile to GM
        """)


def test_memory_plan_reuses_dead_bytes_and_apply_places_the_buffers() -> None:
    before = lower(MUL_ADD_RELU, stop_after="verify built")
    assert format_kernel(before) == expect("""
        kernel mul_add_relu  (target ascend910b, 1 blocks)
          # Schedule(mul_add_relu)
          #   .split('d', 'i', 64, outer='i_o', inner='i_i')
          gm input a: float16[256]
          gm input b: float16[256]
          gm input c: float16[256]
          gm output d: float16[256]
          UB a_ub: float16[64] x1   # tile of a
          UB b_ub: float16[64] x1   # tile of b
          UB c_ub: float16[64] x1   # tile of c
          UB d_ub: float16[64] x1   # tile of d
          UB d_t1: float16[80] x1   # temporary of d: (a[i] * b[i])
          UB d_t2: float16[80] x1   # temporary of d: ((a[i] * b[i]) + c[i])
          program AIV:
            for i_o in 0..4:   # tiles of i (split by 64)
              [MTE2] copy_gm_ub  a_ub@(0)[1:64, 64:1] <- a@(64*i_o)[1:64, 64:1]   # load a tile into UB
              [MTE2] copy_gm_ub  b_ub@(0)[1:64, 64:1] <- b@(64*i_o)[1:64, 64:1]   # load b tile into UB
              [MTE2] copy_gm_ub  c_ub@(0)[1:64, 64:1] <- c@(64*i_o)[1:64, 64:1]   # load c tile into UB
              [V] vec_binary fn=mul  d_t1@(0)[1:128, 64:1] <- a_ub@(0)[1:128, 64:1], b_ub@(0)[1:128, 64:1]   # d: mul
              [V] vec_binary fn=add  d_t2@(0)[1:128, 64:1] <- d_t1@(0)[1:128, 64:1], c_ub@(0)[1:128, 64:1]   # d: add
              [V] vec_unary fn=relu  d_ub@(0)[1:128, 64:1] <- d_t2@(0)[1:128, 64:1]   # d: relu
              [MTE3] copy_ub_gm  d@(64*i_o)[1:64, 64:1] <- d_ub@(0)[1:64, 64:1]   # store d tile to GM
        """)
    log = PassLog()
    after = lower(MUL_ADD_RELU, log=log, stop_after="apply memory plan")
    # live ranges are instruction positions; d_t2 takes d_t1's bytes (both V): 672 B instead
    # of 832. d_ub (live [5, 6]) could take c_ub's (dead after 4) for 544 B, but then the next
    # tile's load of c (MTE2) would wait for this tile's store of d (MTE3): UB has room, so
    # no bytes are shared across pipes inside the loop. Of the packings of that peak, this
    # one keeps the sources of the mul (a_ub, b_ub: groups 0-3, 4-7 of the 16 UB bank groups
    # of 32 B) and of the add (d_t1: 12-15 and 0, c_ub: 8-11) apart (lower/bank_groups.py)
    assert log.text("memory plan") == expect("""
        memory plan of mul_add_relu:
          buffer      copy  scope  offset   size     live
          a_ub        0     UB     0        128      [0, 3]
          b_ub        0     UB     128      128      [1, 3]
          c_ub        0     UB     256      128      [2, 4]
          d_ub        0     UB     544      128      [5, 6]
          d_t1        0     UB     384      160      [3, 4]
          d_t2        0     UB     384      160      [4, 5]
          UB: peak 672 B of 188160 B usable; all buffers without reuse 832 B (best-fit-by-start, 0 cross-pipe reuses)
        """)
    # only the buffer declarations change: each gets its byte offset per copy
    assert format_kernel(after) == expect("""
        kernel mul_add_relu  (target ascend910b, 1 blocks)
          # Schedule(mul_add_relu)
          #   .split('d', 'i', 64, outer='i_o', inner='i_i')
          gm input a: float16[256]
          gm input b: float16[256]
          gm input c: float16[256]
          gm output d: float16[256]
          UB a_ub: float16[64] x1 at [0]   # tile of a
          UB b_ub: float16[64] x1 at [128]   # tile of b
          UB c_ub: float16[64] x1 at [256]   # tile of c
          UB d_ub: float16[64] x1 at [544]   # tile of d
          UB d_t1: float16[80] x1 at [384]   # temporary of d: (a[i] * b[i])
          UB d_t2: float16[80] x1 at [384]   # temporary of d: ((a[i] * b[i]) + c[i])
          program AIV:
            for i_o in 0..4:   # tiles of i (split by 64)
              [MTE2] copy_gm_ub  a_ub@(0)[1:64, 64:1] <- a@(64*i_o)[1:64, 64:1]   # load a tile into UB
              [MTE2] copy_gm_ub  b_ub@(0)[1:64, 64:1] <- b@(64*i_o)[1:64, 64:1]   # load b tile into UB
              [MTE2] copy_gm_ub  c_ub@(0)[1:64, 64:1] <- c@(64*i_o)[1:64, 64:1]   # load c tile into UB
              [V] vec_binary fn=mul  d_t1@(0)[1:128, 64:1] <- a_ub@(0)[1:128, 64:1], b_ub@(0)[1:128, 64:1]   # d: mul
              [V] vec_binary fn=add  d_t2@(0)[1:128, 64:1] <- d_t1@(0)[1:128, 64:1], c_ub@(0)[1:128, 64:1]   # d: add
              [V] vec_unary fn=relu  d_ub@(0)[1:128, 64:1] <- d_t2@(0)[1:128, 64:1]   # d: relu
              [MTE3] copy_ub_gm  d@(64*i_o)[1:64, 64:1] <- d_ub@(0)[1:64, 64:1]   # store d tile to GM
        """)


def test_dependences_of_the_planned_kernel() -> None:
    log = PassLog()
    lower(VADD, log=log, stop_after="dependences")
    assert log.text("dependences") == expect("""
        dependences of vadd: 9
          S0: [MTE2] copy_gm_ub  x_ub[copy (i_o % 2)]@(0)[1:64, 64:1] <- x@(64*i_o)[1:64, 64:1]   # load x tile into UB
          S1: [MTE2] copy_gm_ub  y_ub@(0)[1:64, 64:1] <- y@(64*i_o)[1:64, 64:1]   # load y tile into UB
          S2: [V] vec_binary fn=add  z_ub@(0)[1:128, 64:1] <- x_ub[copy (i_o % 2)]@(0)[1:128, 64:1], y_ub@(0)[1:128, 64:1]   # z: add
          S3: [MTE3] copy_ub_gm  z@(64*i_o)[1:64, 64:1] <- z_ub@(0)[1:64, 64:1]   # store z tile to GM
          S0 -> S0 [UB] x_ub[copy (i_o % 2)]: MTE2 write -> MTE2 write (WAW); carried by i_o dist 2
          S0 -> S2 [UB] x_ub[copy (i_o % 2)]: MTE2 write -> V read (RAW); loop-independent; carried by i_o dist 2
          S1 -> S1 [UB] y_ub: MTE2 write -> MTE2 write (WAW); carried by i_o dist 1
          S1 -> S2 [UB] y_ub: MTE2 write -> V read (RAW); loop-independent; carried by i_o dist 1
          S2 -> S0 [UB] x_ub[copy (i_o % 2)]: V read -> MTE2 write (WAR); carried by i_o dist 2
          S2 -> S1 [UB] y_ub: V read -> MTE2 write (WAR); carried by i_o dist 1
          S2 -> S2 [UB] z_ub: V write -> V write (WAW); carried by i_o dist 1
          S2 -> S3 [UB] z_ub: V write -> MTE3 read (RAW); loop-independent; carried by i_o dist 1
          S3 -> S2 [UB] z_ub: MTE3 read -> V write (WAR); carried by i_o dist 1
        """)


# VADD after ``place syncs``: every dependence above gets its sync, the double-buffered x_ub
# its ping-pong pair (two prologue sets, id (i_o % 2) in the loop, two epilogue waits).
VADD_PLACED = """
    program AIV:
      set_flag V->MTE2 id=0 [ch 4, prologue]   # x_ub[copy (i_o % 2)]: V read -> MTE2 write (WAR)
      set_flag V->MTE2 id=1 [ch 4, prologue]   # x_ub[copy (i_o % 2)]: V read -> MTE2 write (WAR)
      set_flag V->MTE2 id=0 [ch 5, prologue]   # y_ub: V read -> MTE2 write (WAR)
      set_flag MTE3->V id=0 [ch 7, prologue]   # z_ub: MTE3 read -> V write (WAR)
      for i_o in 0..4:   # tiles of i (split by 64)
        wait_flag V->MTE2 id=(i_o % 2) [ch 4, wait]   # x_ub[copy (i_o % 2)]: V read -> MTE2 write (WAR)
        barrier MTE2 [ch 0]   # x_ub[copy (i_o % 2)]: MTE2 write -> MTE2 write (WAW)
        [MTE2] copy_gm_ub  x_ub[copy (i_o % 2)]@(0)[1:64, 64:1] <- x@(64*i_o)[1:64, 64:1]   # load x tile into UB
        wait_flag V->MTE2 id=0 [ch 5, wait]   # y_ub: V read -> MTE2 write (WAR)
        barrier MTE2 [ch 1]   # y_ub: MTE2 write -> MTE2 write (WAW)
        [MTE2] copy_gm_ub  y_ub@(0)[1:64, 64:1] <- y@(64*i_o)[1:64, 64:1]   # load y tile into UB
        set_flag MTE2->V id=0 [ch 3, set]   # y_ub: MTE2 write -> V read (RAW); x_ub[copy (i_o % 2)]: MTE2 write -> V read (RAW)
        wait_flag MTE2->V id=0 [ch 3, wait]   # y_ub: MTE2 write -> V read (RAW); x_ub[copy (i_o % 2)]: MTE2 write -> V read (RAW)
        wait_flag MTE3->V id=0 [ch 7, wait]   # z_ub: MTE3 read -> V write (WAR)
        barrier V [ch 2]   # z_ub: V write -> V write (WAW)
        [V] vec_binary fn=add  z_ub@(0)[1:128, 64:1] <- x_ub[copy (i_o % 2)]@(0)[1:128, 64:1], y_ub@(0)[1:128, 64:1]   # z: add
        set_flag V->MTE2 id=(i_o % 2) [ch 4, set]   # x_ub[copy (i_o % 2)]: V read -> MTE2 write (WAR)
        set_flag V->MTE2 id=0 [ch 5, set]   # y_ub: V read -> MTE2 write (WAR)
        set_flag V->MTE3 id=0 [ch 6, set]   # z_ub: V write -> MTE3 read (RAW)
        wait_flag V->MTE3 id=0 [ch 6, wait]   # z_ub: V write -> MTE3 read (RAW)
        [MTE3] copy_ub_gm  z@(64*i_o)[1:64, 64:1] <- z_ub@(0)[1:64, 64:1]   # store z tile to GM
        set_flag MTE3->V id=0 [ch 7, set]   # z_ub: MTE3 read -> V write (WAR)
      wait_flag V->MTE2 id=0 [ch 4, epilogue]   # x_ub[copy (i_o % 2)]: V read -> MTE2 write (WAR)
      wait_flag V->MTE2 id=1 [ch 4, epilogue]   # x_ub[copy (i_o % 2)]: V read -> MTE2 write (WAR)
      wait_flag V->MTE2 id=0 [ch 5, epilogue]   # y_ub: V read -> MTE2 write (WAR)
      wait_flag MTE3->V id=0 [ch 7, epilogue]   # z_ub: MTE3 read -> V write (WAR)
    """


def test_place_syncs_gives_every_dependence_its_sync() -> None:
    before = lower(VADD, stop_after="dependences")  # the planned kernel the syncs go into
    assert text(before) == expect("""
        program AIV:
          for i_o in 0..4:   # tiles of i (split by 64)
            [MTE2] copy_gm_ub  x_ub[copy (i_o % 2)]@(0)[1:64, 64:1] <- x@(64*i_o)[1:64, 64:1]   # load x tile into UB
            [MTE2] copy_gm_ub  y_ub@(0)[1:64, 64:1] <- y@(64*i_o)[1:64, 64:1]   # load y tile into UB
            [V] vec_binary fn=add  z_ub@(0)[1:128, 64:1] <- x_ub[copy (i_o % 2)]@(0)[1:128, 64:1], y_ub@(0)[1:128, 64:1]   # z: add
            [MTE3] copy_ub_gm  z@(64*i_o)[1:64, 64:1] <- z_ub@(0)[1:64, 64:1]   # store z tile to GM
        """)
    assert text(lower(VADD, stop_after="place syncs")) == expect(VADD_PLACED)


def test_remove_redundant_syncs_drops_the_implied_ones() -> None:
    # x_ub's WAR pair goes: the MTE2 load of tile i+2 starts after y_ub's wait of tile i+1,
    # which waits for the V add of tile i. The MTE2 barriers go: the load of tile i reaches
    # the load of tile i+1 (or i+2) through that chain too (MTE2 -> V -> MTE2 flags). The
    # syncs left keep their channel-local ids.
    log = PassLog()
    after = lower(VADD, log=log, stop_after="remove redundant syncs")
    assert log.text("place syncs") == format_kernel(log.results["place syncs"].kernel)
    assert text(log.results["place syncs"].kernel) == expect(VADD_PLACED)
    assert text(after) == expect("""
        program AIV:
          set_flag V->MTE2 id=0 [ch 5, prologue]   # y_ub: V read -> MTE2 write (WAR)
          set_flag MTE3->V id=0 [ch 7, prologue]   # z_ub: MTE3 read -> V write (WAR)
          for i_o in 0..4:   # tiles of i (split by 64)
            [MTE2] copy_gm_ub  x_ub[copy (i_o % 2)]@(0)[1:64, 64:1] <- x@(64*i_o)[1:64, 64:1]   # load x tile into UB
            wait_flag V->MTE2 id=0 [ch 5, wait]   # y_ub: V read -> MTE2 write (WAR)
            [MTE2] copy_gm_ub  y_ub@(0)[1:64, 64:1] <- y@(64*i_o)[1:64, 64:1]   # load y tile into UB
            set_flag MTE2->V id=0 [ch 3, set]   # y_ub: MTE2 write -> V read (RAW); x_ub[copy (i_o % 2)]: MTE2 write -> V read (RAW)
            wait_flag MTE2->V id=0 [ch 3, wait]   # y_ub: MTE2 write -> V read (RAW); x_ub[copy (i_o % 2)]: MTE2 write -> V read (RAW)
            wait_flag MTE3->V id=0 [ch 7, wait]   # z_ub: MTE3 read -> V write (WAR)
            [V] vec_binary fn=add  z_ub@(0)[1:128, 64:1] <- x_ub[copy (i_o % 2)]@(0)[1:128, 64:1], y_ub@(0)[1:128, 64:1]   # z: add
            set_flag V->MTE2 id=0 [ch 5, set]   # y_ub: V read -> MTE2 write (WAR)
            set_flag V->MTE3 id=0 [ch 6, set]   # z_ub: V write -> MTE3 read (RAW)
            wait_flag V->MTE3 id=0 [ch 6, wait]   # z_ub: V write -> MTE3 read (RAW)
            [MTE3] copy_ub_gm  z@(64*i_o)[1:64, 64:1] <- z_ub@(0)[1:64, 64:1]   # store z tile to GM
            set_flag MTE3->V id=0 [ch 7, set]   # z_ub: MTE3 read -> V write (WAR)
          wait_flag V->MTE2 id=0 [ch 5, epilogue]   # y_ub: V read -> MTE2 write (WAR)
          wait_flag MTE3->V id=0 [ch 7, epilogue]   # z_ub: MTE3 read -> V write (WAR)
        """)


def test_allocate_event_ids_separates_overlapping_channels() -> None:
    # Pruned, both MTE2->V channels use id 0, and the second is set (after c's load) before
    # the first is waited (before the mul): one id would be set twice. Allocation gives the
    # second id 1; likewise the two V->MTE2 WARs (a_ub and b_ub against the mul, c_ub against
    # the add: the next tile's loads wait for the last reads of this one). MTE3->V is the WAR
    # of d_ub against the last tile's store, and the barrier before the mul the WAR of d_t1
    # against the last tile's relu reading d_t2 at the same bytes.
    before = lower(MUL_ADD_RELU, stop_after="remove redundant syncs")
    assert text(before, comments=False) == expect("""
        program AIV:
          set_flag V->MTE2 id=0 [ch 8, prologue]
          set_flag V->MTE2 id=0 [ch 9, prologue]
          set_flag MTE3->V id=0 [ch 11, prologue]
          for i_o in 0..4:
            wait_flag V->MTE2 id=0 [ch 8, wait]
            [MTE2] copy_gm_ub  a_ub@(0)[1:64, 64:1] <- a@(64*i_o)[1:64, 64:1]
            [MTE2] copy_gm_ub  b_ub@(0)[1:64, 64:1] <- b@(64*i_o)[1:64, 64:1]
            set_flag MTE2->V id=0 [ch 6, set]
            wait_flag V->MTE2 id=0 [ch 9, wait]
            [MTE2] copy_gm_ub  c_ub@(0)[1:64, 64:1] <- c@(64*i_o)[1:64, 64:1]
            set_flag MTE2->V id=0 [ch 7, set]
            wait_flag MTE2->V id=0 [ch 6, wait]
            barrier V [ch 3]
            [V] vec_binary fn=mul  d_t1@(0)[1:128, 64:1] <- a_ub@(0)[1:128, 64:1], b_ub@(0)[1:128, 64:1]
            set_flag V->MTE2 id=0 [ch 8, set]
            wait_flag MTE2->V id=0 [ch 7, wait]
            barrier V [ch 4, keep]
            [V] vec_binary fn=add  d_t2@(0)[1:128, 64:1] <- d_t1@(0)[1:128, 64:1], c_ub@(0)[1:128, 64:1]
            set_flag V->MTE2 id=0 [ch 9, set]
            wait_flag MTE3->V id=0 [ch 11, wait]
            barrier V [ch 5, keep]
            [V] vec_unary fn=relu  d_ub@(0)[1:128, 64:1] <- d_t2@(0)[1:128, 64:1]
            set_flag V->MTE3 id=0 [ch 10, set]
            wait_flag V->MTE3 id=0 [ch 10, wait]
            [MTE3] copy_ub_gm  d@(64*i_o)[1:64, 64:1] <- d_ub@(0)[1:64, 64:1]
            set_flag MTE3->V id=0 [ch 11, set]
          wait_flag V->MTE2 id=0 [ch 8, epilogue]
          wait_flag V->MTE2 id=0 [ch 9, epilogue]
          wait_flag MTE3->V id=0 [ch 11, epilogue]
        """)
    after = lower(MUL_ADD_RELU, stop_after="allocate event ids")
    assert text(after, comments=False) == expect("""
        program AIV:
          set_flag V->MTE2 id=0
          set_flag V->MTE2 id=1
          set_flag MTE3->V id=0
          for i_o in 0..4:
            wait_flag V->MTE2 id=0
            [MTE2] copy_gm_ub  a_ub@(0)[1:64, 64:1] <- a@(64*i_o)[1:64, 64:1]
            [MTE2] copy_gm_ub  b_ub@(0)[1:64, 64:1] <- b@(64*i_o)[1:64, 64:1]
            set_flag MTE2->V id=0
            wait_flag V->MTE2 id=1
            [MTE2] copy_gm_ub  c_ub@(0)[1:64, 64:1] <- c@(64*i_o)[1:64, 64:1]
            set_flag MTE2->V id=1
            wait_flag MTE2->V id=0
            barrier V
            [V] vec_binary fn=mul  d_t1@(0)[1:128, 64:1] <- a_ub@(0)[1:128, 64:1], b_ub@(0)[1:128, 64:1]
            set_flag V->MTE2 id=0
            wait_flag MTE2->V id=1
            barrier V
            [V] vec_binary fn=add  d_t2@(0)[1:128, 64:1] <- d_t1@(0)[1:128, 64:1], c_ub@(0)[1:128, 64:1]
            set_flag V->MTE2 id=1
            wait_flag MTE3->V id=0
            barrier V
            [V] vec_unary fn=relu  d_ub@(0)[1:128, 64:1] <- d_t2@(0)[1:128, 64:1]
            set_flag V->MTE3 id=0
            wait_flag V->MTE3 id=0
            [MTE3] copy_ub_gm  d@(64*i_o)[1:64, 64:1] <- d_ub@(0)[1:64, 64:1]
            set_flag MTE3->V id=0
          wait_flag V->MTE2 id=0
          wait_flag V->MTE2 id=1
          wait_flag MTE3->V id=0
        """)
