"""The package's import graph: cycles and upward imports, function-level imports included.

    PYTHONPATH=. python tools/import_graph.py            # summary: cycles, upward imports, the
                                                         # function-level imports that hold a cycle
    PYTHONPATH=. python tools/import_graph.py --lazy     # also every import inside a function
    PYTHONPATH=. python tools/import_graph.py --json     # machine-readable

Reads the source with ``ast`` (nothing is imported), so it sees what ``lint-imports`` sees and
also what it does not: an import inside a function body, a method, or an ``if TYPE_CHECKING:``
block is recorded with where it sits. ``symgrad.cli`` lives in ``cli/`` in a source checkout
(installed as ``symgrad.cli``); it is read from there.

The layers are read from the ``layers`` contract of ``[tool.importlinter]`` in pyproject.toml
(docs/contributing.md, "Architecture"), so that this tool names the layer of each end of an
upward import; a module is in the layer of its longest matching prefix.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _layers() -> list[tuple[str, tuple[str, ...]]]:
    """The layers contract of pyproject.toml, bottom up: (name, module prefixes). The root
    package (`symgrad/__init__.py`) is the public API; `symgrad.cli` (cli/), which import-linter
    does not see, is the top."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        config = tomllib.load(fh)["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    (container,) = contract["containers"]
    out = []
    for layer in contract["layers"]:
        tails = [t.strip().strip("()") for t in layer.replace("|", ":").split(":")]
        out.append((tails[0], tuple(f"{container}.{t}" for t in tails)))
    out[0] = ("CLI", out[0][1] + ("symgrad.cli",))     # `python -m symgrad` is the CLI
    out.reverse()
    public = next(i for i, (_, p) in enumerate(out) if "symgrad.nn" in p)
    out[public] = (out[public][0], out[public][1] + ("symgrad",))
    return out


LAYERS = _layers()


def layer_of(module: str) -> int:
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    if best is None:
        raise KeyError(module)
    return best


def modules() -> dict[str, str]:
    """Module name -> file path, for symgrad/ and cli/ (as symgrad.cli)."""
    out: dict[str, str] = {}
    for base, prefix in ((os.path.join(ROOT, "symgrad"), "symgrad"),
                         (os.path.join(ROOT, "cli"), "symgrad.cli")):
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            rel = os.path.relpath(dirpath, base)
            pkg = prefix if rel == "." else prefix + "." + rel.replace(os.sep, ".")
            for f in sorted(filenames):
                if not f.endswith(".py"):
                    continue
                name = pkg if f == "__init__.py" else pkg + "." + f[:-3]
                out[name] = os.path.join(dirpath, f)
    return out


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, is_pkg: bool, known: set[str]):
        self.module, self.is_pkg, self.known = module, is_pkg, known
        self.func_depth = 0
        self.type_checking = 0
        self.found: list[tuple[str, int, str]] = []  # (target, line, where)

    def _where(self) -> str:
        if self.type_checking:
            return "type-checking"
        return "function" if self.func_depth else "module"

    def visit_FunctionDef(self, node):
        self.func_depth += 1
        self.generic_visit(node)
        self.func_depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node):
        test = ast.unparse(node.test)
        if test in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            self.type_checking += 1
            for n in node.body:
                self.visit(n)
            self.type_checking -= 1
            for n in node.orelse:
                self.visit(n)
        else:
            self.generic_visit(node)

    def _resolve(self, name: str) -> str | None:
        # the longest known module that is name or a prefix of it
        parts = name.split(".")
        while parts:
            cand = ".".join(parts)
            if cand in self.known:
                return cand
            parts.pop()
        return None

    def _add(self, name: str, line: int):
        target = self._resolve(name)
        if target is not None and target != self.module:
            self.found.append((target, line, self._where()))

    def visit_Import(self, node):
        for a in node.names:
            if a.name == "symgrad" or a.name.startswith("symgrad."):
                self._add(a.name, node.lineno)

    def visit_ImportFrom(self, node):
        if node.level:
            pkg = self.module.split(".")
            if not self.is_pkg:
                pkg = pkg[:-1]
            if node.level > 1:
                pkg = pkg[: len(pkg) - (node.level - 1)]
            base = ".".join(pkg)
            if node.module:
                base = base + "." + node.module
        else:
            base = node.module or ""
            if not (base == "symgrad" or base.startswith("symgrad.")):
                return
        for a in node.names:
            full = base + "." + a.name
            # `from pkg import submodule` imports the submodule; `from mod import name` the module
            if full in self.known:
                self._add(full, node.lineno)
            else:
                self._add(base, node.lineno)


def edges() -> list[tuple[str, str, int, str]]:
    mods = modules()
    known = set(mods)
    out = []
    for name, path in mods.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        v = _Visitor(name, path.endswith("__init__.py"), known)
        v.visit(tree)
        for item in dict.fromkeys(v.found):  # one edge per (target, line): `from m import a, b`
            out.append((name,) + item)
    return out


def sccs(nodes, adj) -> list[list[str]]:
    """Tarjan's strongly connected components of size > 1 (the import cycles)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return sorted(out, key=len, reverse=True)


def _is_ancestor_package(a: str, b: str) -> bool:
    # Every edge counts, a package's own ones included: `from . import __version__` in
    # symgrad/native.py runs symgrad/__init__.py, which imports the whole runtime, and
    # import-linter sees it the same way. (The implicit import of a parent package that
    # `import symgrad.x` makes is not an edge here, nor in import-linter.)
    return False


def report(kinds: set[str]):
    es = [e for e in edges() if e[3] in kinds]
    adj = defaultdict(set)
    nodes = set()
    for a, b, _, _ in es:
        nodes |= {a, b}
        if not _is_ancestor_package(a, b):
            adj[a].add(b)
    cyc = sccs(nodes, adj)
    upward = [(a, b, line, where) for a, b, line, where in es
              if not _is_ancestor_package(a, b) and layer_of(b) > layer_of(a)]
    return es, cyc, upward


def _says_start_up(path: str, line: int) -> bool:
    """Whether the import at `line` (1-based) of `path` carries a comment saying it is lazy for
    start-up time: "start-up" in a comment on its line or on the line just above."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read().splitlines()
    for i in (line - 1, line - 2):
        if 0 <= i < len(text) and "#" in text[i] and "start-up" in text[i].split("#", 1)[1]:
            return True
    return False


def cycle_held_imports() -> list[tuple[str, str, int, bool]]:
    """The function-level imports that hold an import cycle: (importer, imported, line, says
    start-up), for each import inside a function whose two ends are in one cycle of the graph
    with function-level imports, where the importer does not also import the module at module
    level (that import holds the cycle, not this one). `says start-up`: the import says in a
    comment that it is lazy for start-up time (SymPy, torch, jax, cupy kept out of `import
    symgrad`), the one reason the layers allow (docs/contributing.md, "Import cycles")."""
    es, cyc, _ = report({"module", "function"})
    component = {m: i for i, c in enumerate(cyc) for m in c}
    module_level = {(a, b) for a, b, _, where in es if where == "module"}
    paths = modules()
    out = []
    for a, b, line, where in es:
        if (where == "function" and a in component and component.get(b) == component[a]
                and (a, b) not in module_level):
            out.append((a, b, line, _says_start_up(paths[a], line)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lazy", action="store_true", help="list every function-level import")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    result = {}
    for label, kinds in (("module-level", {"module"}),
                         ("with function-level", {"module", "function"})):
        es, cyc, up = report(kinds)
        result[label] = {"cycles": cyc, "upward": up, "edges": len(es)}
    result["cycle-held function-level imports"] = cycle_held_imports()
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        return 0
    for label, r in result.items():
        if label == "cycle-held function-level imports":
            continue
        cyc = r["cycles"]
        print(f"== {label} imports: {r['edges']} edges, {len(cyc)} cycle(s), "
              f"{sum(map(len, cyc))} module(s) in cycles, {len(r['upward'])} upward import(s)")
        for c in cyc:
            print(f"  cycle of {len(c)}: " + ", ".join(m.replace('symgrad.', '') for m in c))
        for a, b, line, where in r["upward"]:
            print(f"  upward ({where}): {a}:{line} -> {b}  "
                  f"[{LAYERS[layer_of(a)][0]} -> {LAYERS[layer_of(b)][0]}]")
    held = cycle_held_imports()
    print(f"== {len(held)} function-level import(s) hold a cycle, "
          f"{sum(marked for *_, marked in held)} of them lazy for start-up time")
    for a, b, line, marked in held:
        print(f"  {a}:{line} -> {b}" + ("  [start-up]" if marked else ""))
    lazy = [e for e in edges() if e[3] == "function"]
    direction = {"down": 0, "within a layer": 0, "up": 0}
    for a, b, _, _ in lazy:
        la, lb = layer_of(a), layer_of(b)
        direction["down" if lb < la else "up" if lb > la else "within a layer"] += 1
    print(f"== {len(lazy)} function-level imports: "
          + ", ".join(f"{n} {d}" for d, n in direction.items()))
    if args.lazy:
        for a, b, line, where in lazy:
            print(f"  {a}:{line} -> {b}  [{LAYERS[layer_of(a)][0]} -> {LAYERS[layer_of(b)][0]}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
