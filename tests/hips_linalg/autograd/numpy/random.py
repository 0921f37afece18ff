"""`autograd.numpy.random`: NumPy's."""
from numpy.random import *  # noqa: F401,F403
from numpy.random import RandomState, randn, seed  # noqa: F401
