"""The ``ascendsched`` command: explain, compile, check and time scheduled algorithms.

``MODULE:FUNCTION`` names a Python file (``path/to/file.py``) or an importable module and a
function in it that returns a Schedule (or an Algorithm, which gets the default schedule).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path

from ascendsched.errors import AscendSchedError


def load(spec: str):
    """Call the function named by ``MODULE:FUNCTION`` and return its Schedule/Algorithm."""
    if ":" not in spec:
        raise AscendSchedError(f"expected MODULE:FUNCTION, got {spec!r} (e.g. examples/softmax.py:schedule)")
    mod_name, func = spec.rsplit(":", 1)
    path = Path(mod_name)
    if path.suffix == ".py" or path.exists():
        if not path.exists():
            raise AscendSchedError(f"no such file: {path}")
        s = importlib.util.spec_from_file_location(path.stem, path)
        assert s is not None and s.loader is not None
        module = importlib.util.module_from_spec(s)
        sys.path.insert(0, str(path.resolve().parent))
        s.loader.exec_module(module)
    else:
        module = importlib.import_module(mod_name)
    if not hasattr(module, func):
        raise AscendSchedError(f"{mod_name} has no function {func!r}")
    return getattr(module, func)()


def cmd_explain(args: argparse.Namespace) -> int:
    from ascendsched.lower.driver import PassLog, lower, schedule_for
    from ascendsched.schedule.printer import print_loop_nest

    sched = schedule_for(load(args.target))
    print(sched.algo)
    print()
    print(sched)
    print()
    print(sched.loop_nest_text() if hasattr(sched, "loop_nest_text") else print_loop_nest(sched))
    log = PassLog(dump_dir=Path(args.dump_ir) if args.dump_ir else None)
    try:
        k = lower(sched, log=log)
    except ImportError:  # sync insertion not available in this build
        k = lower(sched, log=log, sync=False)
    for name in ("dependences", "memory plan"):
        if name in log.results:
            print(f"\n{name}:\n{log.results[name]}")
    print(f"\nkernel IR:\n{k}")
    print(f"\npass timings:\n{log.timings()}")
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    from ascendsched.driver import compile_kernel

    k, proj = compile_kernel(load(args.target), Path(args.output))
    print(f"wrote {proj.out_dir}: {proj.kernel_cpp.name}, {proj.host_main.name}, "
          f"{proj.tiling_h.name}, {proj.cmake.name} ({k.block_dim} blocks)")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ascendsched.driver import check

    reduce = True if args.reduced else False if args.full else None
    verdicts = check(load(args.target), work_dir=Path(args.work_dir) if args.work_dir else None,
                     sanitize=not args.no_sanitize, cpp=not args.ir_only, reduce=reduce)
    for v in verdicts:
        print(v)
    ran_on = {v.instance for v in verdicts if v.instance}
    if ran_on:
        print(f"executed on the reduced instance {', '.join(sorted(ran_on))}; the full kernel "
              f"was lowered, emitted and compared with it")
    ok = all(v.ok for v in verdicts)
    print("all checks passed" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


def cmd_time(args: argparse.Namespace) -> int:
    from ascendsched.lower.driver import lower, schedule_for
    from ascendsched.sim.timeline import write_chrome_trace, write_png
    from ascendsched.sim.timing import model_time

    kernel = lower(schedule_for(load(args.target)))
    report = model_time(kernel, record=bool(args.timeline or args.png))
    print(report.summary())
    print("  (modelled figures: an estimate from the cost parameters above, calibrated against "
          "published 910B measurements in benchmarks/calibration/; not a measurement)")
    if args.timeline:
        p = write_chrome_trace(report, args.timeline)
        print(f"wrote {p}: open it in https://ui.perfetto.dev or chrome://tracing")
    if args.png:
        print(f"wrote {write_png(report, args.png)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ascendsched", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("explain", help="print algorithm, schedule, dependences, syncs, memory map, IR")
    e.add_argument("target", help="MODULE:FUNCTION returning a Schedule or Algorithm")
    e.add_argument("--dump-ir", help="write each lowering step to DIR/NNN_<step>.txt")
    e.set_defaults(fn=cmd_explain)
    c = sub.add_parser("compile", help="write the AscendC project (kernel, host, tiling, CMake)")
    c.add_argument("target")
    c.add_argument("-o", "--output", required=True, help="project directory to write")
    c.set_defaults(fn=cmd_compile)
    k = sub.add_parser("check", help="run the verification ladder on the CPU, one verdict per check")
    k.add_argument("target")
    k.add_argument("--work-dir", help="where to write the emitted project (default: a temp dir)")
    k.add_argument("--no-sanitize", action="store_true", help="build without ASan/UBSan")
    k.add_argument("--ir-only", action="store_true", help="skip the emitted C++ (no g++ needed)")
    size = k.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true",
                      help="execute the full kernel even when it is larger than the check budget")
    size.add_argument("--reduced", action="store_true",
                      help="execute the reduced instance even when the full kernel is small")
    k.set_defaults(fn=cmd_check)
    t = sub.add_parser("time", help="model the kernel's time on the target: time, roofline, "
                       "pipe utilisation, critical pipe (a model, not a measurement)")
    t.add_argument("target")
    t.add_argument("--timeline", help="write a Chrome trace-event JSON (Perfetto) to this path")
    t.add_argument("--png", help="write a Gantt chart PNG to this path")
    t.set_defaults(fn=cmd_time)
    args = p.parse_args(argv)
    try:
        return args.fn(args)
    except AscendSchedError as err:
        print(f"ascendsched: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
