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
Modules: ``loop`` (the public ``Agent`` and the turn itself), ``state`` (shared attributes, log
and events), ``scheduling`` (when a compaction runs and where it lands), ``recovery`` (overflow and
the failure ladder), ``model_request`` (one request on the wire), ``tool_calls`` (code in the kernel,
kernel restarts), ``engine`` (compaction without placement), ``kernel_tool`` (in-process and
jupyter_client kernels), ``openai_chat`` (wire format), ``requests`` (``compact.run()`` hand-over),
``kernel_state`` (snapshot glue run inside the kernel), ``kernel_reset`` (restart wording and
budget), ``magic`` (``%%agent``). The pure decisions live in ``core.triggers`` and ``core.overflow``.
"""
