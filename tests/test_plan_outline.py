"""A preview decides from the entries' stored outlines (issue 37): the same plan as deciding from
the entries themselves, on real SQLite logs (pi sessions as imported, a demo session with a
compaction, pins and branch summaries, and a log written before outlines were kept)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from builders import counting_clock, counting_ids
from postgres_server import raw_sql

from ipython_compact.cli.demo_transcript import TranscriptGenerator
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.compaction.deciding import forget_remembered
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.core.triage_facts import facts_from_outline, facts_of, outline_of
from ipython_compact.store import SessionStore
from ipython_compact.store.importers import import_transcript, load_transcript
from ipython_compact.store.json_text import sorted_json_bytes

PI = Path(__file__).parent / "fixtures" / "pi"


def plan_from_entries(compactor: Compactor, session: str) -> dict[str, Any]:
    """The plan as deciding from the entries gives it (a compaction's decision), gists left out."""
    forget_remembered()
    work = compactor._work_or_raise(session, None, gists=True)
    assert not work.outlined
    return without_gists(compactor._plan_of(session, None, work).to_json())


def plan_from_outlines(compactor: Compactor, session: str) -> dict[str, Any]:
    forget_remembered()
    plan = compactor.plan(session)
    work = compactor._work(session)  # the remembered preview is outlined, so this decides anew
    assert work is not None and not work.outlined
    return plan.to_json()


def without_gists(plan: dict[str, Any]) -> dict[str, Any]:
    plan["externalize"] = [{k: v for k, v in p.items() if k != "gist"} for p in plan["externalize"]]
    return plan


def demo_session(store: SessionStore, rounds: int) -> None:
    store.create_session("s")
    for msgs in TranscriptGenerator(3).rounds(rounds):
        store.append_many("s", [("message", {"message": m}) for m in msgs])


@pytest.mark.parametrize("fixture", ["before-compaction.jsonl", "large-session.jsonl"])
@pytest.mark.parametrize(("estimator", "keep"), [("chars4", 20_000), ("density", 4_000), ("density", 300)])
def test_a_preview_of_an_imported_pi_session_is_the_plan_from_its_entries(
    tmp_path: Path, fixture: str, estimator: str, keep: int
) -> None:
    with SessionStore(tmp_path / "log.db") as store:
        import_transcript(store, load_transcript(PI / fixture), "s")
        settings = CompactionSettings(estimator=estimator, keep_recent_tokens=keep)  # type: ignore[arg-type]
        compactor = Compactor(store, settings=settings)
        outlined = plan_from_outlines(compactor, "s")
        assert outlined["summarize"]["entries"] > 0
        assert outlined == plan_from_entries(compactor, "s")


def test_a_preview_after_a_compaction_with_pins_and_a_branch_summary(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "log.db", clock=counting_clock(), new_id=counting_ids()) as store:
        demo_session(store, 12)
        compactor = Compactor(store, settings=CompactionSettings(keep_recent_tokens=1500))
        compactor.pin("s", text="always seed 1337")
        compactor.compact("s")
        first = store.path("s")[3].id
        compactor.pin("s", entry_id=first)
        leaf = store.leaf("s")
        assert leaf is not None
        for msgs in TranscriptGenerator(4).rounds(6):
            store.append_many("s", [("message", {"message": m}) for m in msgs])
        compactor.summarize_branch("s", leaf)  # back to the compaction's branch, its summary appended
        for msgs in TranscriptGenerator(5).rounds(8):
            store.append_many("s", [("message", {"message": m}) for m in msgs])
        outlined = plan_from_outlines(compactor, "s")
        assert outlined["previous_summary"] and outlined["anchors"]["pins"]
        assert outlined == plan_from_entries(compactor, "s")


def test_a_log_written_before_outlines_were_kept_is_previewed_from_its_entries(location: str | Path) -> None:
    with SessionStore(location, clock=counting_clock(), new_id=counting_ids()) as store:
        demo_session(store, 15)
        expected = plan_from_entries(Compactor(store), "s")
    # as the outline migration leaves older rows: no outline
    raw_sql(location, "UPDATE entries SET outline = NULL", lift_guards=True)
    with SessionStore(location) as store:
        assert plan_from_outlines(Compactor(store), "s") == expected


def test_every_entry_written_keeps_its_outline(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "log.db") as store:
        demo_session(store, 4)
        import_transcript(store, load_transcript(PI / "large-session.jsonl"), "pi")
        for session in ("s", "pi"):
            view = store.context_outline(session)
            entries = store.path(session)
            assert [o for o in view.outlines] == [outline_of(e, sorted_json_bytes) for e in entries]
            assert [facts_from_outline(o) is None for o in view.outlines] == [
                facts_of(e) is None for e in entries
            ]


@pytest.mark.parametrize("shape", ["linear", "branched", "two sessions interleaved", "compacted"])
def test_the_outline_view_holds_the_context_views_entries(location: str | Path, shape: str) -> None:
    """Read as one run of rows when the view is one (a session appended to without branching),
    else link by link: the same entries, estimates and offset as ``context_view`` either way,
    on both engines."""
    with SessionStore(location, clock=counting_clock(), new_id=counting_ids()) as store:
        demo_session(store, 6)
        if shape == "branched":
            store.set_leaf("s", store.path("s")[20].id)
            for msgs in TranscriptGenerator(7).rounds(2):
                store.append_many("s", [("message", {"message": m}) for m in msgs])
        if shape == "two sessions interleaved":
            store.create_session("t")
            for msgs in TranscriptGenerator(8).rounds(3):
                for m in msgs:
                    store.append("t", "message", {"message": m})
                    store.append("s", "message", {"message": m})
        if shape == "compacted":
            Compactor(store, settings=CompactionSettings(keep_recent_tokens=300)).compact("s")
            for msgs in TranscriptGenerator(9).rounds(2):
                store.append_many("s", [("message", {"message": m}) for m in msgs])
        view, outlined = store.context_view("s"), store.context_outline("s")
        assert [e.id for e in outlined.entries] == [e.id for e in view.entries]
        assert [e.parent_id for e in outlined.entries] == [e.parent_id for e in view.entries]
        assert (outlined.tokens_density, outlined.tokens_chars4, outlined.offset, outlined.head_id) == (
            view.tokens_density,
            view.tokens_chars4,
            view.offset,
            view.head_id,
        )
        assert outlined.outlines == [outline_of(e, sorted_json_bytes) for e in view.entries]
