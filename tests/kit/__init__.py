"""The test kit: every helper the tests share, one module per job (import as ``tests.kit.X``).

* ``reference``    -- ``assert_matches_reference`` (lower, simulate, compare with numpy), the
  README's softmax schedule and row-tile schedules of the library's row kernels.
* ``ir``           -- hand-built vector kernel IR (``vadd_kernel``, ``row_max_sub_kernel``,
  ``kernel`` for any AIV body), the sync builders (``set_flag``, ``wait_flag``, ``barrier``),
  a hand-synced vadd and memory plans (``hand_plan``: explicit or packed offsets; ``planned``:
  the planner passes on a kernel; ``memory_plan``: lifetimes and plan of a schedule).
* ``hand``         -- hand-synced fixtures for the emitter (``sync_vadd``, ``sync_row_max_sub``)
  and ``ops_kernel``, one kernel using every other vector template.
* ``cpp``          -- ``build_projects``: emit kernels (and text mutants), build them with g++.
* ``cube``         -- hand-built GEMM kernels in Cube (AIC) IR, their inputs and numpy
  reference, instruction mutation.
* ``vector_cases`` -- the library vector kernels under default and hand schedules, lowered once
  per session.
* ``scaled_cases`` -- large instances of the library kernels and e2e hand schedules.
* ``strategies``   -- hypothesis strategies: random vector algorithms and legal schedules.
"""
