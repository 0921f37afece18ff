"""autograd.numpy.random: NumPy's random module (draws are plain NumPy values)."""
from numpy.random import *  # noqa: F401,F403
from numpy.random import RandomState, rand, randint, randn, seed  # noqa: F401
