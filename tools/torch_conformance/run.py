"""Differential sweep (needs torch): each scenario in s_*.py runs with torch and with symgrad.

    PYTHONPATH=. python tools/torch_conformance/run.py [s_gradcheck ...] [k=name-substring] [-v]
"""
import sys, importlib
sys.path.insert(0, __import__("os").path.dirname(__file__))
import harness
mods = [a for a in sys.argv[1:] if a.startswith("s_")] or ["s_gradcheck", "s_functional", "s_hooks", "s_backward", "s_function", "s_tensor", "s_gradmode", "s_misc"]
pat = next((a[2:] for a in sys.argv[1:] if a.startswith("k=")), None)
for m in mods:
    try:
        importlib.import_module(m)
    except ModuleNotFoundError as e:
        if e.name != m: raise
harness.main(pat, "-v" in sys.argv)
