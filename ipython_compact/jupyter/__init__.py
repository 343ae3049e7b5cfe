"""Rank 6: the Jupyter Server extension, which serves a notebook's persisted session to the panel
before the kernel side is loaded."""
