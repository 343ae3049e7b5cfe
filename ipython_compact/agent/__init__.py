"""The RLM-style REPL agent: a turn loop whose one tool runs Python in a kernel, with compaction.

A host program::

    import openai
    from ipython_compact.agent.engine import default_engine
    from ipython_compact.agent.kernel_tool import JupyterKernel
    from ipython_compact.agent.loop import Agent
    from ipython_compact.core.settings import CompactionSettings
    from ipython_compact.store import SessionStore

    store = SessionStore("sessions.db")
    settings = CompactionSettings()
    with JupyterKernel() as kernel:  # a real kernel with the extension loaded
        agent = Agent(store=store, session="work", client=openai.OpenAI(), model="gpt-4o-mini",
                      context_window=128_000, settings=settings, engine=default_engine(store, settings),
                      kernel=kernel, snapshot_dir="snapshots")
        print(agent.ask("Load data.csv and tell me the best month.").text)

In a notebook: ``%load_ext ipython_compact`` then a ``%%agent --model NAME`` cell.
Modules: ``loop`` (the turn loop and every compaction trigger), ``engine`` (compaction without
placement), ``kernel_tool`` (in-process and jupyter_client kernels), ``openai_chat`` (wire format),
``requests`` (``compact.run()`` hand-over), ``kernel_state`` (snapshot glue run inside the kernel),
``magic`` (``%%agent``). The pure decisions live in ``core.triggers`` and ``core.overflow``.
"""
