"""The ``ascendsched`` command: explain, compile, check, time and tune scheduled algorithms.

``MODULE:FUNCTION`` names a Python file (``path/to/file.py``) or an importable module and a
function in it that returns a Schedule (or an Algorithm, which gets the default schedule).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ascendsched.errors import AscendSchedError, UserCodeError

if TYPE_CHECKING:  # the CLI imports the compiler lazily, to start fast
    from ascendsched.lower.pass_log import PassLog


def load(spec: str, accept: tuple[type, ...] = ()) -> object:
    """Call the function named by ``MODULE:FUNCTION``; return its Schedule/GemmSchedule/Algorithm
    (or an instance of a type in ``accept``: ``tune`` takes a search Space).

    A file is imported as a module registered in ``sys.modules`` (so ``@dataclass`` and
    ``from __future__ import annotations`` work in it). Every failure of the user's code
    (import, signature, call, return value) is a :class:`UserCodeError` naming the file, the
    line when known, and what to change.
    """
    from ascendsched.algo.algorithm import Algorithm
    from ascendsched.schedule.gemm import GemmSchedule
    from ascendsched.schedule.schedule import Schedule

    if not isinstance(spec, str) or ":" not in spec:
        raise UserCodeError(
            f"expected MODULE:FUNCTION, got {spec!r} (e.g. examples/softmax.py:schedule)")
    mod_name, func = spec.rsplit(":", 1)
    module, path = _import(mod_name)
    if not func or not hasattr(module, func):
        names = sorted(n for n, v in vars(module).items()
                       if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module.__name__)
        raise UserCodeError(
            f"{mod_name} has no function {func!r}; functions defined there: "
            f"{', '.join(names) or '(none)'}")
    fn = getattr(module, func)
    if not callable(fn):
        raise UserCodeError(
            f"{spec}: {func!r} is a {type(fn).__name__}, not a function; wrap it: "
            f"def {func}_schedule(): return {func}")
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        params = []
    needed = [p.name for p in params if p.default is p.empty
              and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if needed:
        raise UserCodeError(
            f"{spec}: {func}() needs arguments ({', '.join(needed)}) but is called with none; "
            f"give them defaults, or add a function without parameters that calls it, e.g. "
            f"def schedule(): return {func}(...)")
    try:
        obj = fn()
    except AscendSchedError:
        raise
    except Exception as e:
        raise UserCodeError(
            f"{spec}: calling {func}() raised {type(e).__name__}: {e}{_where(e, path)}") from e
    if not isinstance(obj, (Schedule, GemmSchedule, Algorithm) + accept):
        extra = "".join(f" or a {t.__name__}" for t in accept)
        raise UserCodeError(
            f"{spec}: {func}() returned {type(obj).__name__} {_short(obj)}; it must return a "
            f"Schedule, a GemmSchedule or an Algorithm{extra} (a missing `return`?)")
    return obj


def _import(mod_name: str) -> tuple[ModuleType, Path | None]:
    path = Path(mod_name)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise UserCodeError(f"no such file: {path} (give a .py file or an importable module)")
        digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
        name = f"ascendsched_user_{digest}_{_ident(path.stem)}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UserCodeError(f"{path} cannot be imported as a Python module; name it *.py")
        module = importlib.util.module_from_spec(spec)
        parent = str(path.resolve().parent)
        if parent not in sys.path:
            sys.path.insert(0, parent)
        sys.modules[name] = module  # dataclasses and typing look their module up here
        try:
            spec.loader.exec_module(module)
        except SyntaxError as e:
            sys.modules.pop(name, None)
            raise UserCodeError(
                f"{path}:{e.lineno}: SyntaxError: {e.msg}; fix the file and retry") from None
        except Exception as e:
            sys.modules.pop(name, None)
            raise UserCodeError(
                f"importing {path} raised {type(e).__name__}: {e}{_where(e, path)}; fix the "
                f"file and retry") from e
        return module, path.resolve()
    try:
        module = importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if e.name and mod_name.startswith(e.name) or e.name == mod_name:
            raise UserCodeError(
                f"no module or file named {mod_name!r}: give a path to a .py file (e.g. "
                f"examples/softmax.py:schedule) or an importable module") from None
        raise UserCodeError(f"importing {mod_name} raised ModuleNotFoundError: {e}") from e
    except Exception as e:
        raise UserCodeError(f"importing {mod_name} raised {type(e).__name__}: {e}") from e
    file = getattr(module, "__file__", None)
    return module, Path(file).resolve() if file else None


def _where(e: BaseException, path: Path | None) -> str:
    """`` (at FILE:LINE)``: the innermost frame of the user's file in ``e``'s traceback."""
    line = None
    tb = e.__traceback__
    while tb is not None:
        if path is not None and Path(tb.tb_frame.f_code.co_filename).resolve() == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" (at {path}:{line})" if line is not None else ""


def _short(obj: object) -> str:
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


def _ident(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


def load_inputs(path: Path) -> dict:
    """The arrays of an ``.npz`` file, by name (``check --inputs``)."""
    import numpy as np

    from ascendsched.errors import InputError

    if not path.is_file():
        raise InputError(f"--inputs: no such file {path}; save one with "
                         f"numpy.savez('{path.name}', x=x_array, ...)")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except Exception as e:
        raise InputError(f"--inputs: {path} is not a numpy .npz file ({type(e).__name__}: {e}); "
                         f"write it with numpy.savez('{path.name}', x=x_array, ...)") from None


def cmd_explain(args: argparse.Namespace) -> int:
    from ascendsched.api.compile import compile_kernel
    from ascendsched.lower.pass_log import PassLog
    from ascendsched.lower.pipeline import lower
    from ascendsched.lower.schedule_for import schedule_for
    from ascendsched.schedule.printer import print_loop_nest

    sched = schedule_for(load(args.target))
    print(sched.algo)
    print()
    print(sched)
    print()
    print(sched.loop_nest_text() if hasattr(sched, "loop_nest_text") else print_loop_nest(sched))
    if args.dump_ir:  # one file per step, the emitted C++ included; the project beside them
        log = PassLog(dump_dir=Path(args.dump_ir))
        k, _ = compile_kernel(sched, Path(args.dump_ir) / "project", log=log)
    else:
        log = PassLog()
        k = lower(sched, log=log)
    for name in ("dependences", "memory plan"):
        if name in log.results:
            print(f"\n{name}{_on_template(log) if name == 'dependences' else ''}:\n"
                  f"{log.results[name]}")
    print(f"\nkernel IR:\n{k}")
    print(f"\npass timings:\n{log.timings()}")
    return 0


def _on_template(log: PassLog) -> str:
    """Where a GEMM's syncs were derived on its tail-free template (lower/sync_template.py):
    say so, since the dependences printed are the template's statements."""
    from ascendsched.lower.pipeline import PLANNED

    tmpl, kern = log.results.get("sync template"), log.results.get(PLANNED)
    if tmpl is None or tmpl is kern or log.results.get("template syncs") is None:
        return ""
    from ascendsched.target import CoreType

    aiv = tmpl.program(CoreType.AIV)  # a mixed kernel: the template's AIC beside the AIV
    mixed = aiv is not None
    own = kern.program(CoreType.AIV)
    mirrored = mixed and own is not None and len(aiv.body) < len(own.body)
    return (f" ({'the AIC program ' if mixed else ''}of the {tmpl.notes[0]}; the kernel's "
            "tile classes and peeled K step take its syncs"
            + ("; the AIV program the kernel's own" if mixed else "")
            + (f", its first tile class for {len(own.body) - len(aiv.body) + 1} (the others "
               "mirror it, lower/class_mirror.py)" if mirrored else "")
            + ", lower/sync_template.py)")


def cmd_compile(args: argparse.Namespace) -> int:
    from ascendsched.api.compile import compile_kernel

    k, proj = compile_kernel(load(args.target), Path(args.output))
    print(f"wrote {proj.out_dir}: {proj.kernel_cpp.name}, {proj.host_main.name}, "
          f"{proj.tiling_h.name}, {proj.cmake.name} ({k.block_dim} blocks)")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ascendsched.api.check import check

    inputs = load_inputs(Path(args.inputs)) if args.inputs else None
    reduce = True if args.reduced else False if args.full else None
    verdicts = check(load(args.target), work_dir=Path(args.work_dir) if args.work_dir else None,
                     sanitize=not args.no_sanitize, cpp=not args.ir_only, inputs=inputs,
                     cpp_timeout=args.timeout, reduce=reduce)
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
    from ascendsched.lower.pipeline import lower
    from ascendsched.lower.schedule_for import schedule_for
    from ascendsched.sim.timeline import (
        format_breakdown,
        op_breakdown,
        write_chrome_trace,
        write_png,
    )
    from ascendsched.sim.timing import model_time

    kernel = lower(schedule_for(load(args.target)))
    report = model_time(kernel, record=bool(args.timeline or args.png or args.by_op))
    print(report.summary())
    if args.by_op:
        for core in sorted({c.core for c in report.cores}):
            rows = op_breakdown(report, core=core)
            block = max((c for c in report.cores if c.core == core), key=lambda c: c.end).block
            print(f"  {core} of block {block} (the last to finish), per pipe and op, cycles "
                  f"over its whole run (modelled):")
            print(format_breakdown(rows))
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
    e.add_argument("--dump-ir", help="write each step to DIR/NNN_<step>.txt (the emitted C++ "
                   "too; its project in DIR/project)")
    e.set_defaults(fn=cmd_explain)
    c = sub.add_parser("compile", help="write the AscendC project (kernel, host, tiling, CMake)")
    c.add_argument("target")
    c.add_argument("-o", "--output", required=True, help="project directory to write")
    c.set_defaults(fn=cmd_compile)
    k = sub.add_parser("check", help="run the verification ladder on the CPU, one verdict per check")
    k.add_argument("target")
    k.add_argument("--work-dir", help="where to write the emitted projects (default: a temporary directory, removed afterwards)")
    k.add_argument("--no-sanitize", action="store_true", help="build without ASan/UBSan")
    k.add_argument("--ir-only", action="store_true", help="skip the emitted C++ (no g++ needed)")
    k.add_argument("--inputs", help="a .npz file with one array per input (default: uniform "
                   "random in [-2, 2]); NaN, inf and rows of zeros are welcome")
    k.add_argument("--timeout", type=float, default=300.0,
                   help="seconds the emitted C++ may run before the check fails (default 300)")
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
    t.add_argument("--by-op", action="store_true",
                   help="also print, per pipe and op, the instances and modelled cycles of the "
                        "core that finished last (vector heads, barrier drains and flag waits "
                        "included)")
    t.set_defaults(fn=cmd_time)
    from ascendsched.api.tune_cli import add_parser as add_tune

    add_tune(sub)
    from ascendsched.benchmarks.bench import add_parser as add_bench

    add_bench(sub)
    args = p.parse_args(argv)
    try:
        return args.fn(args)
    except AscendSchedError as err:
        print(f"ascendsched: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
