"""Options of the kernel side, as traitlets, so ``%config CompactConfig.x = ...`` and
``c.CompactConfig.x = ...`` in ipython_config.py both work.

The instance is created with ``parent=shell`` (so it reads the shell's config) and appended to
``shell.configurables`` (so ``%config`` lists and sets it); unloading removes it again.
"""

from __future__ import annotations

from typing import Any

from traitlets import Bool, Dict, Enum, Float, Int, Unicode
from traitlets.config import Configurable


class CompactConfig(Configurable):  # type: ignore[misc]
    """Settings for ``%compact``, the comm target, snapshots and the probe."""

    session = Unicode(
        "",
        help="Session name to bind to; empty means: IPYTHON_COMPACT_SESSION, the notebook "
        "path, the kernel's connection file, or (terminal IPython) the working "
        "directory and profile.",
    ).tag(config=True)
    database = Unicode(
        "",
        help="The session log: a file path or a postgresql:// URL (docs/team.md); empty "
        "means "
        "IPYTHON_COMPACT_DB, else sessions.db in the data "
        "directory.",
    ).tag(config=True)
    snapshots = Unicode(
        "",
        help="Where namespace snapshots go: a folder, or an fsspec URL (s3://bucket/prefix, gs://, az://, "
        "file://; docs/team.md); empty means IPYTHON_COMPACT_SNAPSHOTS, else snapshots/ in the data "
        "directory.",
    ).tag(config=True)
    context_window = Int(
        128_000, help="The model's context window in tokens (for status and thresholds)."
    ).tag(config=True)
    compaction = Dict(help="CompactionSettings overrides, e.g. {'keep_recent_tokens': 8000}.").tag(
        config=True
    )
    summarizer = Unicode("offline", help="'offline' (no network) or 'openai'.").tag(config=True)
    model = Unicode("", help="Model name for the openai summarizer.").tag(config=True)
    base_url = Unicode("", help="Base URL of an OpenAI-compatible server for the openai summarizer.").tag(
        config=True
    )
    auto_snapshot = Bool(True, help="Snapshot the namespace after cells (debounced).").tag(config=True)
    background_snapshots = Bool(
        True,
        help=(
            "In a kernel, write automatic snapshots from a forked child (a copy-on-write image of the "
            "namespace) "
            "so the next cell never waits for them; the child is paused while a cell runs. Off, or where "
            "fork is "
            "not available, they run on the main thread between cells."
        ),
    ).tag(config=True)
    snapshot_debounce = Float(1.5, help="Seconds of quiet after a cell before the automatic snapshot.").tag(
        config=True
    )
    snapshot_max_name_bytes = Int(512 << 20, help="Largest serialized value kept in a snapshot.").tag(
        config=True
    )
    snapshot_max_total_bytes = Int(2 << 30, help="Largest total snapshot size.").tag(config=True)
    snapshot_generations = Int(3, help="How many snapshot generations to keep.").tag(config=True)
    snapshot_name_timeout = Float(
        5.0, help="Seconds one value may take to serialize before it is skipped."
    ).tag(config=True)
    verify_unchanged = Enum(
        ["sampled", "full"],
        default_value="sampled",
        help="How AUTOMATIC snapshots prove a large array (> 1 MiB) unchanged: 'sampled' trusts 64 sampled "
        "blocks (nearly free, but an in-place edit between them is missed until the next full "
        "verification); 'full' re-hashes every byte each time. Explicit snapshots always verify fully.",
    ).tag(config=True)
    full_verify_every = Int(
        10,
        min=1,
        help="With verify_unchanged = 'sampled', every Nth automatic snapshot verifies fully, so an edit the "
        "samples missed is in the snapshot at most N automatic snapshots later (1 = always full).",
    ).tag(config=True)
    snapshot_durable = Bool(True, help="fsync snapshot files before renaming them into place.").tag(
        config=True
    )
    probe_deadline = Float(
        0.2, help="Seconds the namespace probe may spend before it reports truncated."
    ).tag(config=True)
    track_files = Bool(
        True, help="Record files that cells open for reading and writing (feeds the ledger)."
    ).tag(config=True)
    cells_by = Enum(
        ["user", "agent"],
        default_value="user",
        help="Who runs this kernel's cells, for the ledger's file lists: 'user' (a notebook: "
        "only "
        "%%agent tool calls are the agent's) or 'agent' (a kernel an agent drives, every "
        "cell "
        "is a tool call).",
    ).tag(config=True)

    def settings_mapping(self) -> dict[str, Any]:
        return dict(self.compaction)


class AgentConfig(Configurable):  # type: ignore[misc]
    """Settings for ``%%agent`` cells, so they need not be retyped on every cell:
    ``%config AgentConfig.model = 'qwen2.5-coder'``. An option on the ``%%agent`` line wins for that
    agent (and is remembered by it until ``--reset`` or another option)."""

    model = Unicode("", help="Model name; empty: CompactConfig.model.").tag(config=True)
    base_url = Unicode(
        "",
        help="Base URL of the OpenAI-compatible server; empty: CompactConfig.base_url, "
        "then $OPENAI_BASE_URL.",
    ).tag(config=True)
    context_window = Int(
        0,
        min=0,
        help="The model's context window in tokens; 0: read it from the server's "
        "/v1/models card (max_model_len, context_length or context_window), "
        "else CompactConfig.context_window.",
    ).tag(config=True)
    max_steps = Int(12, min=1, help="Tool-call steps per turn.").tag(config=True)
    stream = Bool(False, help="Show the model's text as it arrives.").tag(config=True)
    fenced_code = Bool(
        True,
        help="Run the ```python/```repl blocks of a reply that has no tool call, as a tool call "
        "(for models that write code instead of calling tools).",
    ).tag(config=True)
    lookup_timeout = Float(5.0, help="Seconds to wait for the server's /v1/models card.").tag(config=True)
