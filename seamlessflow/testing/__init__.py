"""Test fakes and harnesses that the tests and the benchmarks share.

Why a package module and not `tests/`: benchmarks (and any outside user of the library) must not import
the test suite. Nothing in the running system imports or runs this package (the layering test checks it):
a fake that a shipped command starts, like the chaos run's stub engine, lives in `seamlessflow/loadtest`.
"""
