"""The ``asyncapi-client`` command line: every operation, streaming walks, four formats.

A small package: ``_args`` (the parser), ``_render`` (one renderer per format behind one
interface, with ``_table`` and ``_text`` for cells and bounded, terminal-safe values),
``_commands`` (one thin function per command), ``_watch`` (``watch``: a line a change,
handled once written), ``_fake`` (``demo`` and ``serve-fake``),
``_signals`` (SIGINT and SIGTERM turned into a clean stop) and ``_main`` (``main``: one
event loop per run, every failure one line on stderr).

Exit status: 0 done; 1 the API answered with an error, could not be reached, or sent what
cannot be printed; 2 bad usage or configuration; 130 interrupted (SIGINT), 143 stopped
(SIGTERM), once the command has unwound. Output closed early by the reader (``| head``)
ends the command quietly with status 0.
"""

from ._main import main

__all__ = ["main"]
