"""The package's version, in the bottom layer: the compiler, the emitters and the native loader
put it in cache keys and generated headers without importing `symgrad/__init__.py` (the public
API, which imports the whole runtime). `symgrad.__version__` re-exports it."""
__version__ = "0.1.0"
