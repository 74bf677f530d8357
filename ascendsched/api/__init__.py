"""The top layer: what a kernel author and the ``ascendsched`` command call.

Everything here stands on the stages (algo, schedule, lower, emit_ascendc, sim, autotune) and
none of them imports it. The low layer of the package, ``ascendsched.errors`` and
``ascendsched.dtypes``, sits under every stage instead. Only ``benchmarks/`` sits between the
modules here: its scripts call ``compile`` and ``check``, and ``cli``'s ``bench`` command
comes from ``benchmarks/bench.py``.

    compile.py          schedule (or algorithm) -> lowered kernel and AscendC project
    check.py            the CPU verification ladder of DESIGN.md, one verdict per rung
    numerics.py         the ladder's inputs (random or the user's) and its tolerances
    sync_minimality.py  each inserted sync removed in turn: is it needed?
    cli.py              the ``ascendsched`` command (explain, compile, check, time; tune, bench)
    tune_cli.py         its ``tune`` subcommand

Nothing is imported here, so ``ascendsched --help`` loads only the CLI: import the module
you need (``from ascendsched.api.check import check``).
"""
