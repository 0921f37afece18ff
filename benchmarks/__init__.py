"""symgrad benchmark suite (peer side).

Entry points::

    python -m benchmarks.run           # ratio tables vs torch eager CPU
    python -m benchmarks.overhead      # per-op overhead on tiny tensors, import time
    python -m benchmarks.compile_time  # symgrad trace / compile stages / cache hit
    python -m benchmarks.check_ns      # checks the symgrad-namespace forwards via torch

Nothing here may import numpy/torch/jax at package import time: the runners set
thread-count environment variables first (see ``benchmarks._env``).
"""
