"""Adapters that put ipython-compact inside other RLM engines (optional extras).

- ``ipython_compact.integrations.dspy`` (extra ``dspy``): ``KernelInterpreter``, a dspy
  ``CodeInterpreter`` on a real IPython kernel, and ``CompactRLM``, a ``dspy.RLM`` whose REPL
  history is compacted by our engine.
- ``ipython_compact.integrations.rlms`` (extra ``rlms``): ``CompactIPythonEnv``, an IPython
  environment for ``rlm.RLM`` (the ``rlms`` package) with compaction, our log, the probe and
  snapshots.

Why a package of its own: the core package must never import dspy or rlms (a test checks it), so
each adapter imports its engine at module level and nothing here imports the adapters. The shared
pieces (``kernel_runner``, ``iteration_log``) use only the standard library and
ipython-compact's public API, so they are tested without either extra installed.
"""
