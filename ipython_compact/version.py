"""The package version, in a module of its own so the kernel side and the CLI can report it
without importing the package root (the public API at the top of the layers)."""

__version__ = "0.1.0"
