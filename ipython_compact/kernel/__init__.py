"""Kernel side of ipython-compact: the extension, magics, comm handler, probe and snapshots.

Imported only when the extension loads (``%load_ext ipython_compact``), never by the pure core.
"""
