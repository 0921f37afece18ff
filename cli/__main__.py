"""`python -m symgrad.cli ...`: the same as the `symgrad` console script."""
import sys

from . import main

sys.exit(main())
