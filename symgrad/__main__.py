"""`python -m symgrad ...`: the same as the `symgrad` console script."""
import sys

from symgrad.cli import main

sys.exit(main())
