"""The kernel's namespace as data: the probe that lists user-defined names and the signed dill
snapshots that bring them back after a restart.

Both the kernel side (magics, comm, helper) and the agent (its kernel tool and supervisor) use
this package, so it sits below both and imports neither.
"""
