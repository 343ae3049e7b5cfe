"""The pure core: standard library only, no clock, no randomness, no I/O.

Ids and times come in as arguments. ``tests/test_core_purity.py`` enforces the import rule.
"""
