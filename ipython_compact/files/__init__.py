"""Rank 1: where the data directory is and how files are written and read safely (no links followed,
atomic replacement, owner-only modes). Everything that touches the disk builds on this."""
