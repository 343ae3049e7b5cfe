"""The RLM-style REPL agent: a turn loop whose one tool runs Python in a kernel, with compaction.

A host program::

    import openai
    from ipython_compact.agent.kernel_tool import JupyterKernel
    from ipython_compact.agent.loop import Agent
    from ipython_compact.store import SessionStore

    store = SessionStore("sessions.db")
    with JupyterKernel() as kernel:  # a real kernel with the extension loaded
        agent = Agent(store=store, session="work", client=openai.OpenAI(), model="gpt-4o-mini",
                      context_window=128_000, kernel=kernel, snapshot_dir="snapshots")
        print(agent.ask("Load data.csv and tell me the best month.").text)

In a notebook: ``%load_ext ipython_compact`` then a ``%%agent --model NAME`` cell.

Modules: ``loop`` (the public ``Agent``: the turn loop and the overflow episode), composed of
``scheduler`` (``CompactionScheduler``: when a compaction runs and where it lands; background
threads, cooldown, failure ladder), ``model_caller`` (``ModelCaller``: one request on the wire)
and ``supervisor`` (``KernelSupervisor``: code in the kernel, snapshots, restarts); they share only
``session_log`` (where to append, whom to tell). Also: ``recovery`` (the failure ladder's pure
steps), ``kernel_tool`` (in-process and jupyter_client kernels), ``openai_chat`` (wire format),
``requests`` (``compact.run()`` hand-over, imported inside kernels), ``kernel_state`` (snapshot
glue run inside the kernel), ``kernel_reset`` (restart wording and budget), ``events`` (what a
turn reports). Compactions are computed by ``ipython_compact.compaction.compactor.Compactor``; the pure
decisions live in ``core.triggers`` and ``core.overflow``.
"""
