"""Rank 4, host side: a client for a running kernel's ipython-compact extension over its comm channel."""
