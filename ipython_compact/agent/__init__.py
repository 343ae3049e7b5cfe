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
``options`` (``AgentOptions``: the plain-valued parameters), ``assembly`` (store, own kernel,
compactor, resumed session and tree budget built from the arguments), ``kernel_reset`` (restart
wording and budget), ``events`` (what a turn reports).

The host reaches code inside the kernel through ``kernel_calls`` (the one table of kernel-side
functions and the one renderer of a call); kernel code reaches the host through the one loopback
bridge, ``subcall_broker`` (host) and ``loopback_client`` (kernel). Kernel-side modules, imported
inside user kernels: ``requests`` (``compact.run()`` hand-over), ``kernel_state`` (names,
snapshots, the session binding), ``rlm_kernel`` (``llm_query``, ``agent_query``, ``FINAL``),
``host_tools`` (an engine's host tools and ``SUBMIT``), ``kernel_history`` (rlms' ``history``). Compactions
are computed by ``ipython_compact.compaction.compactor.Compactor``; the pure
decisions live in ``core.triggers`` and ``core.overflow``.
"""
