"""Test fakes and harnesses that the tests and the benchmarks share.

Why a package module and not `tests/`: benchmarks (and any outside user of the library) must not import
the test suite. Nothing in the running system imports this package (the layering test checks it). Fakes
say so in their names: `stub_engine.StubEngine` is not an inference engine.
"""
