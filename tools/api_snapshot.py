"""Check that a split of a module into rooms moved code verbatim: snapshot every symgrad module's
attributes (kind, qualname, docstring, source of functions and classes and of their members,
the value of plain data) before and after, then compare.

    PYTHONPATH=. python tools/api_snapshot.py snapshot before.json    # on the old commit
    PYTHONPATH=. python tools/api_snapshot.py snapshot after.json     # on the new one
    python tools/api_snapshot.py compare before.json after.json

`compare` prints each attribute missing, differing or added (a new module's own are not
listed) and the moves of `__module__` (a moved function's new room). Every module of the
package is imported (SymPy included), so run it in a fresh interpreter.
"""
import importlib
import inspect
import json
import os
import pkgutil
import sys
import types


def _plain(v, depth=0):
    if isinstance(v, (str, int, float, bool, type(None), bytes)):
        return repr(v)
    if isinstance(v, (tuple, list, frozenset, set)) and depth < 3:
        items = [_plain(x, depth + 1) for x in v]
        return type(v).__name__ + str(sorted(items) if isinstance(v, (set, frozenset)) else items)
    if isinstance(v, dict) and depth < 3:
        return "dict" + str([(_plain(k, depth + 1), _plain(x, depth + 1)) for k, x in v.items()])
    return _desc(v, depth + 1)


def _src(o):
    try:
        return inspect.getsource(o)
    except Exception:
        return None


def _desc(o, depth=0):
    if isinstance(o, types.ModuleType):
        return "module " + o.__name__
    if inspect.isclass(o) or inspect.isroutine(o):
        d = {"qualname": getattr(o, "__qualname__", None), "doc": getattr(o, "__doc__", None)}
        if depth == 0:
            d["src"] = _src(o)
            if inspect.isclass(o):
                d["members"] = {
                    k: (type(v).__name__, getattr(v, "__qualname__", None),
                        v if isinstance(v, str) else getattr(v, "__doc__", None),
                        _src(v) if inspect.isroutine(v) else None)
                    for k, v in vars(o).items() if k not in ("__dict__", "__weakref__", "__module__")}
                d["mro"] = [c.__qualname__ for c in o.__mro__]
        return json.dumps(d, sort_keys=True, default=str)
    return type(o).__name__


def snapshot(path):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import symgrad

    for info in pkgutil.walk_packages(symgrad.__path__[:1], "symgrad."):
        if "__main__" in info.name or info.name.startswith("symgrad.cli"):
            continue
        try:
            importlib.import_module(info.name)
        except Exception as e:   # an optional target's module (cupy, jax) may not import
            print("skip", info.name, e)
    mods = sorted(m for m in sys.modules if m == "symgrad" or m.startswith("symgrad."))
    attrs, homes = {}, {}
    for m in mods:
        for k, v in sorted(vars(sys.modules[m]).items()):
            if k.startswith("__") and k not in ("__all__", "__doc__"):
                continue
            try:
                attrs[f"{m}:{k}"] = _desc(v) if inspect.isclass(v) or inspect.isroutine(v) \
                    else _plain(v)
            except Exception as e:
                attrs[f"{m}:{k}"] = "ERR " + repr(e)
            if inspect.isclass(v) or inspect.isfunction(v):
                homes[f"{m}:{k}"] = v.__module__
    attrs["dir(symgrad)"] = repr(dir(symgrad))
    with open(path, "w") as fh:
        json.dump({"attrs": attrs, "modules": homes, "mods": mods}, fh, indent=0, sort_keys=True)
    print(len(attrs), "attributes in", len(mods), "modules")


def compare(path_a, path_b) -> int:
    with open(path_a) as fa, open(path_b) as fb:
        a, b = json.load(fa), json.load(fb)
    new_mods = set(b["mods"]) - set(a["mods"])
    print("modules only after:", sorted(new_mods))
    print("modules only before:", sorted(set(a["mods"]) - set(b["mods"])))
    bad = 0
    for k, v in a["attrs"].items():
        if k not in b["attrs"]:
            print("MISSING", k)
            bad += 1
        elif b["attrs"][k] != v:
            print("DIFFERS", k)
            bad += 1
    for k in b["attrs"]:
        if k not in a["attrs"] and k.split(":")[0] not in new_mods:
            print("ADDED", k)
    moved = {(a["modules"][k], b["modules"].get(k)) for k in a["modules"]
             if b["modules"].get(k) != a["modules"][k]}
    print("__module__ moves:", sorted(moved, key=str))
    print("missing or differing:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["snapshot"] and len(sys.argv) == 3:
        snapshot(sys.argv[2])
    elif sys.argv[1:2] == ["compare"] and len(sys.argv) == 4:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
