"""The symgrad command line: compile | show | check | cache.

    symgrad compile examples/softplus.py:Softplus -o build/
    symgrad show    examples/softplus.py:Softplus --latex
    symgrad check   examples/softplus.py:Softplus
    symgrad cache   info

Exit status: 0 success; 1 the work failed (a check failed, the forward cannot be traced or
compiled, the file does not import); 2 a usage error (bad options, a missing file or name,
a name that is not a Function or a function). Errors are one line, `symgrad: error: ...`;
`--traceback` shows the Python traceback instead.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time

from .load import LoadError, UsageError

PROG = "symgrad"

EPILOG = """\
commands:
  compile   write the generated module(s) and print the op counts
  show      print the forward formula and every derivative formula
  check     gradcheck and gradgradcheck the generated module (float64, central differences)
  cache     show or clear the disk cache of generated modules

examples:
  symgrad compile examples/softplus.py:Softplus
  symgrad show examples/layer_norm.py:LayerNorm --latex
  symgrad check examples/mish.py:Mish
  symgrad cache info

exit status: 0 success, 1 failure (check failed, forward not traceable), 2 usage error.
Run `symgrad COMMAND --help` for the options of a command.
"""

INPUTS_HELP = """\
example inputs: the Function's `example_inputs` (a tuple, or a static/class method returning
one); --shape NAME=2,3 options override them; with neither, the module is shape-generic.
"""

COMPILE_EPILOG = INPUTS_HELP + """
examples:
  symgrad compile examples/softplus.py:Softplus              # writes ./softplus_grad.py
  symgrad compile examples/softplus.py:Softplus -o build/    # writes build/softplus_grad.py
  symgrad compile examples/mlp.py:MLPLoss -o mlp_grad.py     # an explicit file name
  symgrad compile model.py:Energy --shape r=64 --dtype float64
"""

SHOW_EPILOG = INPUTS_HELP + """
examples:
  symgrad show examples/softplus.py:Softplus
  symgrad show examples/gelu.py:GELU --latex       # LaTeX, for papers and notebooks
"""

CHECK_EPILOG = INPUTS_HELP + """
The module is compiled from float64 inputs and checked at the example point (when there is
one) and at random points: the backward's vector-Jacobian product against central
differences of the forward (first order), then grad_module()'s backward against central
differences of the backward (second order). Random points are drawn around the example
(signs kept; zero entries moved too, so all-zero examples still exercise the forward), else
in (-1.5, 1.5), (0.2, 1.5) or (0.05, 0.95); draws where the forward is not finite are skipped
and counted. The point of the worst error is printed. A check where every derivative
compared was exactly 0 says NOT CHECKED and fails. Without examples or --shape every input
has shape (8,).

examples:
  symgrad check examples/softplus.py:Softplus
  symgrad check examples/lennard_jones.py:LennardJones --points 5 --no-second-order
"""

CACHE_EPILOG = """\
The cache lives in $SYMGRAD_CACHE_DIR, else $XDG_CACHE_HOME/symgrad, else ~/.cache/symgrad.

examples:
  symgrad cache info                       # totals, then one line per entry
  symgrad cache clear model.py:Energy      # only that function's entries
  SYMGRAD_CACHE_DIR=/tmp/sgcache symgrad cache clear
"""


class _Parser(argparse.ArgumentParser):
    """argparse, with the prefix `symgrad: error:` and exit 2 for usage errors (its default)."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, f"{PROG}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog=PROG, formatter_class=fmt, epilog=EPILOG,
                     description="symgrad: write the forward, get the backward as readable "
                                 "generated code.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--traceback", action="store_true",
                        help="show the Python traceback of an error instead of one line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def target_args(p, shapes=True):
        p.add_argument("spec", metavar="FILE.py:NAME",
                       help="a Python file and the Function class (or function) in it")
        if shapes:
            p.add_argument("--shape", action="append", default=[], metavar="NAME=2,3",
                           help="the shape of input NAME (NAME= for a scalar); one --shape "
                                "may list several: --shape x=2,3 w=3")

    p = sub.add_parser("compile", parents=[common], formatter_class=fmt, epilog=COMPILE_EPILOG,
                       help="write the generated module(s)",
                       description="Compile a forward and write the generated module(s).")
    target_args(p)
    p.add_argument("--target", choices=("numpy", "c", "cuda", "torch", "jax"), default="numpy",
                   help="what to generate (default: numpy); torch / jax: the same steps as "
                        "torch / jax.numpy operations (generating needs neither installed)")
    p.add_argument("-o", "--output", metavar="OUT", default=None,
                   help="a directory, or a file name ending in .py (default: the current "
                        "directory, file name from the module)")
    p.add_argument("--dtype", choices=("float32", "float64"), default=None,
                   help="the float dtype of the inputs (default: the examples', else float32)")

    p = sub.add_parser("show", parents=[common], formatter_class=fmt, epilog=SHOW_EPILOG,
                       help="print the forward and derivative formulas",
                       description="Print the forward formula and each derivative formula.")
    target_args(p)
    p.add_argument("--latex", action="store_true", help="print LaTeX (aligned environments)")

    p = sub.add_parser("check", parents=[common], formatter_class=fmt, epilog=CHECK_EPILOG,
                       help="gradcheck and gradgradcheck the generated module",
                       description="Check the generated backward numerically (float64).")
    target_args(p)
    p.add_argument("--target", choices=("numpy", "c"), default="numpy",
                   help="which generated module to check (default: numpy)")
    p.add_argument("--points", type=int, default=3, metavar="N",
                   help="random points besides the example point (default: 3)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--no-second-order", dest="second_order", action="store_false",
                   help="skip gradgradcheck")
    p.add_argument("--atol", type=float, default=1e-5, help="absolute tolerance (1e-5)")
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance (1e-3)")
    p.add_argument("--eps", type=float, default=1e-6, help="finite-difference step (1e-6)")

    p = sub.add_parser("cache", parents=[common], formatter_class=fmt, epilog=CACHE_EPILOG,
                       help="show or clear the disk cache",
                       description="Show or clear the disk cache of generated modules.")
    p.add_argument("action", choices=("info", "clear"))
    p.add_argument("name", nargs="?", metavar="NAME", default=None,
                   help="clear: only the entries of this function (NAME, FILE.py:NAME or "
                        "FILE.py); info: only list those")
    return parser


def _shape_lists(argv):
    """argv with `--shape a=2,3 b=3` spelled `--shape a=2,3 --shape b=3`: the NAME=dims words
    after a --shape belong to it, and FILE.py:NAME may still come after them."""
    out, state = [], None    # "value": the next word is --shape's own; "more": NAME=dims may follow
    for word in argv:
        if state == "more" and "=" in word and not word.startswith("-"):
            out.append("--shape")          # one more NAME=dims of the same --shape
        elif word == "--shape":
            state = "value"
        elif word.startswith("--shape=") or state == "value":
            state = "more"
        else:
            state = None
        out.append(word)
    return out


def main(argv=None) -> int:
    """Run the command line; returns the exit status (0, 1 or 2)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(_shape_lists(argv))
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        if args.traceback:
            raise
        return _fail(str(exc), 2)
    except KeyboardInterrupt:
        return _fail("interrupted", 1)
    except Exception as exc:  # one line, not a traceback: the cause and where it happened
        if args.traceback:
            raise
        return _fail(_describe(exc, args), 1)


def _fail(message, status):
    message = " ".join(str(message).split())
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return status


def _describe(exc, args):
    from symgrad.errors import SymgradError

    from .load import one_line, user_frame

    if isinstance(exc, LoadError):
        return str(exc)
    spec = getattr(args, "spec", None)
    what = f"cannot compile {spec}: " if spec else ""
    if isinstance(exc, SymgradError):
        return f"{what}{one_line(exc)}"
    return f"{what}{one_line(exc)}{user_frame(exc)} (--traceback for details)"


def _version():
    try:
        from symgrad import __version__
    except Exception:
        return "?"
    return __version__


# --------------------------------------------------------------------------- shared steps
def _inputs(fn, args, dtype=None):
    """Example inputs for compiling: --shape options, else example_inputs, else none."""
    from .load import example_inputs, parse_shapes, spec_inputs, with_dtype

    shapes = parse_shapes(args.shape, fn)
    if shapes:
        return spec_inputs(fn, shapes, dtype or "float32")
    examples = example_inputs(fn)
    if examples is None:
        return ()
    return with_dtype(examples, dtype) if dtype else examples


def _compile(fn, inputs, target="numpy", dtype=None, label=""):
    import symgrad

    with _progress(label):
        return symgrad.compile(fn, *inputs, target=target, dtype=dtype)


@contextlib.contextmanager
def _progress(label):
    """'symgrad: compiling NAME: differentiate (1.2s)' on stderr, only on a terminal."""
    if not sys.stderr.isatty() or os.environ.get("SYMGRAD_NO_PROGRESS"):
        yield
        return
    import importlib

    def module(name):   # the submodule itself (symgrad.trace is also a function's name)
        return importlib.import_module(f"symgrad.{name}")

    state = {"stage": "trace", "t0": time.perf_counter()}
    done = threading.Event()
    patched = [(module("trace"), "trace"), (module("differentiate"), "differentiate"),
               (module("optimize"), "optimize"), (module("compiler"), "emit")]
    saved = [getattr(mod, name) for mod, name in patched]

    def spy(fn, stage):
        def wrapper(*a, **k):
            state["stage"] = stage
            return fn(*a, **k)
        return wrapper

    def tick():
        while not done.wait(0.25):
            elapsed = time.perf_counter() - state["t0"]
            if elapsed > 0.5:
                sys.stderr.write(f"\r\033[K{PROG}: compiling {label}: {state['stage']} "
                                 f"({elapsed:.1f}s)")
                sys.stderr.flush()

    # the compiler imports its stages at call time, so wrapping the module attributes shows
    # which stage runs; they are restored on exit
    for (mod, name), fn in zip(patched, saved):
        setattr(mod, name, spy(fn, name))
    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        for (mod, name), fn in zip(patched, saved):
            setattr(mod, name, fn)
        if time.perf_counter() - state["t0"] > 0.5:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _ops_line(module):
    ops = module.stats.get("ops", {})
    f, b = ops.get("forward", {}), ops.get("backward", {})
    line = (f"ops: forward {f.get('before', '?')} -> {f.get('after', '?')}, "
            f"backward {b.get('before', '?')} -> {b.get('after', '?')} (before -> after CSE)")
    rewrites = module.stats.get("rewrites") or []
    if rewrites:
        line += f"; rewrites: {', '.join(rewrites)}"
    return line


# --------------------------------------------------------------------------- commands
def cmd_compile(args) -> int:
    from .load import LoadError, one_line, resolve

    fn, path, name = resolve(args.spec)
    inputs = _inputs(fn, args, args.dtype)
    module = _compile(fn, inputs, args.target, args.dtype, label=f"{path}:{name}")
    out = args.output or os.curdir
    if out.endswith(".py"):
        target = out
    else:
        main_name = module.main
        if not main_name.replace(".", "_").replace("_", "a").isalnum():
            main_name = f"{_snake(name)}_grad.py"     # e.g. a lambda: '<lambda>_grad.py'
        target = os.path.join(out, main_name)
    # a directory that does not exist is created, and each level created is said (as
    # `mkdir -p -v` does): a typo in -o must not make a tree silently
    missing = []
    for folder in _parents(os.path.dirname(os.path.abspath(target))):
        if os.path.lexists(folder):
            break
        missing.append(folder)
    try:
        written = module.write(target)
    except OSError as exc:   # an unwritable or impossible -o: one line naming the path
        where = _display(os.fspath(exc.filename or target))
        if isinstance(exc, (FileExistsError, NotADirectoryError)):
            reason = "not a directory"
            where = next((p for p in _parents(os.fspath(exc.filename or target))
                          if os.path.exists(p) and not os.path.isdir(p)), where)
            where = _display(where)
        else:
            reason = (exc.strerror or one_line(exc)).lower()
        raise LoadError(f"cannot write {_display(os.fspath(target))} (-o {out}): {where}: "
                        f"{reason}") from exc
    for folder in reversed(missing):
        print(f"created directory {_display(folder)}/")
    for path_written in written:
        print(f"wrote {_display(path_written)}")
    print(_ops_line(module))
    return 0


def cmd_show(args) -> int:
    from symgrad.differentiate import differentiate
    from symgrad.emit.printers import formula_latex, formula_text

    from .load import resolve

    fn, path, name = resolve(args.spec)
    inputs = _inputs(fn, args)
    module = _compile(fn, inputs, label=f"{path}:{name}")
    graph = module.graph
    vjp = differentiate(graph)
    constants = ", ".join(f"{k}={v!r}" for k, v in graph.constants) or "none"
    shapes = "generic" if graph.generic else ", ".join(
        f"{n.name}{tuple(n.shape)}" for n in graph.inputs)
    print(f"# {graph.source}  (inputs: {shapes}; constants: {constants})")
    if args.latex:
        print("% forward")
        print(formula_latex(graph))
        print("% derivatives (vector-Jacobian product; grad_out = dL/dout)")
        print(formula_latex(vjp))
    else:
        print("forward:")
        for line in formula_text(graph).splitlines():
            print(f"    {line}")
        print("derivatives (vector-Jacobian product; grad_out = dL/dout):")
        for line in formula_text(vjp).splitlines():
            print(f"    {line}")
        print(_ops_line(module))
    return 0


def cmd_check(args) -> int:
    import numpy

    from .gradcheck import draw_points, gradcheck, gradgradcheck, summary
    from .load import example_inputs, parse_shapes, resolve, shaped_inputs, to_numpy

    fn, path, name = resolve(args.spec)
    rng = numpy.random.default_rng(args.seed)
    shapes = parse_shapes(args.shape, fn)
    examples = None if shapes else example_inputs(fn)
    if shapes:
        call = shaped_inputs(fn, shapes, lambda s: numpy.zeros(s))
    elif examples is not None:
        call = tuple(numpy.asarray(to_numpy(a), dtype=numpy.float64)
                     if _is_float_array(a) else a for a in examples)
    else:
        call = None          # shape-generic: every input gets shape (8,)
    module = _compile(fn, call or (), target=args.target, dtype="float64",
                      label=f"{path}:{name}")
    n = len(module.input_names)
    if call is None:
        base = [numpy.zeros(8) for _ in range(n)]
        try:
            with numpy.errstate(all="ignore"):
                module.forward(*base)
        except Exception as exc:    # e.g. x.sum(dim=1) of a 1-d input: the default shape
            from .load import UsageError, one_line

            raise UsageError(f"check {path}:{name}: without example inputs every input has "
                             f"shape (8,), and the forward cannot run on that ({one_line(exc)}); "
                             "give --shape NAME=2,3 for each input, or example_inputs") from exc
    else:
        base = [numpy.asarray(to_numpy(a)) for a in call if hasattr(a, "shape")]
    points = []
    if examples is not None:
        # an integer example (a gather index) is no point to move: kept as it is
        points.append([numpy.array(a, dtype=numpy.float64) if _is_float_array(a) else a
                       for a in base])
    # random points that exercise the forward: around the example (zero entries moved too:
    # all-zero examples must not give copies of one point) or in RANGES, draws outside the
    # forward's domain skipped and counted
    drawn, outside = draw_points(module, base, args.points, rng, around=examples is not None)
    points += drawn
    tols = {"eps": args.eps, "atol": args.atol, "rtol": args.rtol}
    label = f"{path}:{name}"
    # the example point is the user's: a kink there is reported; random points that land
    # within eps of a kink (clamp(y, -1, 1) at y = 1.0000006) skip those entries
    random_from = 1 if examples is not None else 0
    reports = [gradcheck(module, points, random_from=random_from, **tols)]
    if args.second_order:
        reports.append(gradgradcheck(module, points, random_from=random_from, **tols))
    ok = True
    for report in reports:
        for line in summary(report, module, points, label, outside, random_from):
            print(line)
        ok = ok and report.ok
    # the overflow probe: extreme inputs, against mpmath references of the true derivative
    from symgrad.numerics import probe_finite

    probe = probe_finite(module)
    print(f"{str(probe).splitlines()[0]} ({label})")
    for line in str(probe).splitlines()[1:11]:
        print(line)
    ok = ok and probe.ok
    return 0 if ok else 1


def cmd_cache(args) -> int:
    from symgrad import cache

    if args.action == "info":
        info = cache.info()
        print(f"directory: {info['directory']}")
        print(f"entries: {info['entries']}")
        print(f"size: {info['bytes']} bytes in {info['files']} file(s)")
        print(f"enabled: {'yes' if info['enabled'] else 'no (SYMGRAD_CACHE=0)'}")
        listed = cache.entries()
        if args.name is not None:
            listed = [e for e in listed if cache._matches(e, args.name)]
        if listed:
            _entry_table(listed)
    else:
        removed = cache.clear(args.name)
        what = f" of {args.name}" if args.name is not None else ""
        print(f"removed {removed['entries']} entries{what} ({removed['files']} file(s)) from "
              f"{cache.directory()}")
    return 0


def _entry_table(entries, limit=200):
    """The entries, most recently used first: function, signature, target, size, last use."""
    rows = [("FUNCTION", "SIGNATURE", "TARGET", "SIZE", "LAST USE")]
    for e in entries[:limit]:
        target = e["target"] + (f" {e['dtype']}" if e["target"] != "numpy" and e["dtype"]
                                else "")
        rows.append((e["function"], e["signature"], target, _size(e["size"]),
                     time.strftime("%Y-%m-%d %H:%M", time.localtime(e["last_use"]))))
    widths = [min(max(len(r[i]) for r in rows), 48) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4])
    if len(entries) > limit:
        print(f"... and {len(entries) - limit} more")


def _size(n):
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


COMMANDS = {"compile": cmd_compile, "show": cmd_show, "check": cmd_check, "cache": cmd_cache}


def _is_float_array(a):
    return hasattr(a, "shape") and "float" in str(getattr(a, "dtype", ""))


def _display(path):
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel.replace(os.sep, "/")


def _parents(path):
    """path, its parent, ... up to the root."""
    path = os.path.abspath(path)
    while True:
        yield path
        parent = os.path.dirname(path)
        if parent == path:
            return
        path = parent


def _snake(name):
    from symgrad.compiler import _snake as snake

    return snake("".join(c if c.isalnum() else "_" for c in name.split(".")[-1]))
