"""The asyncapi_client benchmark suite: ``python -m benchmarks`` (``make bench``).

Not part of the library or of ``make test``; see ``benchmarks/README.md``.
"""
