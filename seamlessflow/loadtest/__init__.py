"""Load-test parts that ship with the library: things that stand in for a real component so a load or chaos
run measures the rest.

Why shipped and not in `seamlessflow/testing`: `seamlessflow chaos run --stub-engines N` starts these as
services, and the running system never starts a test fake. They say what they are in their names:
`stub_engine.StubEngine` generates fixed token ids, not language.
"""
