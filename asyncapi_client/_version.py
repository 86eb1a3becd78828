"""The package version, in one place: the build reads it from here (hatch), and so does the code.

A constant, not ``importlib.metadata``: looking the distribution up costs about 80 ms at import,
which every CLI run and every process of a fleet would pay.
"""

__version__ = "0.1.0"
