"""The assembler service: `python -m services.assembler --config PATH` (what `seamlessflow up` starts)."""
