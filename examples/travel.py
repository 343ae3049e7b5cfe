"""The seed's worked example: a model with a 3,000-token window answers travel questions.

After each question it prints how many messages the model's context holds and how many entries
the session log holds. The context stays bounded while the log keeps growing: a background
compaction (question 4 crosses the background line), a manual compaction with focus "Keep the hotel
shortlist" queued while
the model is busy (question 6), and a provider overflow recovered by a blocking compaction
(question 7). Finally it lists the compaction entries with their reasons.

Everything is real: the local OpenAI-compatible server (scripted answers, real HTTP, the
``openai`` client), a real IPython kernel through jupyter_client (the model keeps its hotel
shortlist in a variable), and a real SQLite session log.

Run:  .venv/bin/python examples/travel.py [--db PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai

from ipython_compact.agent.kernel_tool import JupyterKernel
from ipython_compact.agent.loop import Agent, AgentEvent
from ipython_compact.agent.openai_chat import PYTHON_TOOL
from ipython_compact.compaction.compactor import Compactor
from ipython_compact.core.entries import COMPACTION, KERNEL_STATE, text_of_content
from ipython_compact.core.prompts import SYSTEM_PROMPT as SUMMARIZER_PROMPT
from ipython_compact.core.settings import CompactionSettings
from ipython_compact.store import SessionStore
from ipython_compact.summarizers.openai_summarizer import OpenAISummarizer
from ipython_compact.testing.model_server import (
    ModelServer,
    RecordedRequest,
    Reply,
    ToolCall,
    estimate_prompt_tokens,
)

WINDOW = 3000
SETTINGS = CompactionSettings(reserve_tokens=1000, keep_recent_tokens=150, background_tokens=920)

QUESTIONS = [
    "I'm planning a week in Lisbon in May. What is the weather like, and what should I pack?",
    "Which neighbourhoods are good to stay in? Keep a shortlist of hotels for me.",
    "What should I eat, and where?",
    "Which day trips are worth it?",
    "What about nightlife?",
    "Any quiet cafés near the hotels on the shortlist?",
    "Put the week together as a day-by-day plan.",
]
BUSY_QUESTION = 5  # the manual compaction is requested while this one is being answered
OVERFLOW_QUESTION = 6  # the provider answers this one with a context-length error first


def _answer(topic: str, facts: list[str], *, closing: bool = True) -> str:
    lines = [f"Here is what I suggest for {topic}:"]
    lines += [f"- {f}" for f in facts]
    if closing:
        lines.append(
            "Tell me if you want me to go deeper on any of these, or adjust for your budget and pace."
        )
    return "\n".join(lines)


ANSWERS = {
    0: _answer(
        "May weather and packing",
        [
            "May is warm and mostly dry: 17-24 °C by day, cooler evenings near the river.",
            "Pack layers, a light rain jacket, comfortable shoes for the steep cobbled hills, and sunscreen.",
            "Sea water is still cold (about 16 °C); bring a swimsuit only if you like bracing swims.",
            "Book trams 28 and the Santa Justa lift early in the day to avoid queues.",
            "Pharmacies (farmácias) are everywhere; tap water is safe to drink.",
            "Get a Viva Viagem card for metro, trams and trains; top it up with zapping credit.",
            "Holidays: 25 April and 1 May close some museums; Santo António festivities start late in the "
            "month.",
            "Evenings can be windy on the miradouros (viewpoints), so keep a light sweater for sunset.",
            "Sunset is around 20:45 in late May, so evenings are long; dinner starts late, around 20:00.",
            "Pickpockets work the crowded trams and Baixa streets: keep your phone in a front pocket.",
            "Cards work almost everywhere, but small tascas and kiosks sometimes want cash.",
            "Church visits need covered shoulders; a light scarf in the day bag solves it.",
            "The city is hilly: plan walks downhill and use the elevadores and tram to go up.",
        ],
    ),
    2: _answer(
        "food",
        [
            "Pastéis de nata at Manteigaria (Chiado) and the original Pastéis de Belém.",
            "Grilled sardines and bifanas at a tasca in Alfama; try Tasca do Chico for fado with dinner.",
            "Time Out Market in Cais do Sodré for a tour of many kitchens in one hall.",
            "Seafood at Cervejaria Ramiro: order clams à Bulhão Pato and finish with a prego.",
            "Ginjinha (sour-cherry liqueur) at A Ginjinha near Rossio.",
            "Bacalhau (salt cod) comes in hundreds of ways; try bacalhau à Brás for a start.",
            "Lunch menus (prato do dia) in small tascas are the best value: soup, main and coffee.",
            "Book dinner ahead at popular places such as Prado or Taberna da Rua das Flores.",
            "Tipping is modest: round up or leave 5-10 % for good table service.",
            "Couvert (bread, olives, cheese) put on the table is charged if you eat it; send it back if not.",
            "Vegetarian options are growing: Ao 26 Vegan Food Project and Jardim dos Sentidos.",
        ],
    ),
    3: _answer("day trips", ["Sintra's palaces; Cascais for the beach."], closing=False),
    4: _answer("nightlife", ["Bairro Alto bars, or fado in Alfama."], closing=False),
    5: _answer(
        "quiet cafés near your hotels",
        [
            "Fábulas near Memmo Alfama; Café Tati near The Lumiares.",
            "Copenhagen Coffee Lab near Lisboa Pessoa.",
        ],
        closing=False,
    ),
    6: _answer(
        "a day-by-day week",
        [
            "Day 1: Alfama, the castle and a fado dinner.",
            "Day 2: Belém — the tower, the monastery and pastéis.",
            "Day 3: Sintra day trip.",
            "Day 4: Chiado, Bairro Alto and the viewpoints; Bairro Alto bars at night.",
            "Day 5: Cascais beaches.",
            "Day 6: LX Factory and the riverside; Time Out Market.",
            "Day 7: Slow morning in a café near your hotel, then departure.",
        ],
    ),
}

HOTEL_CODE = (
    "hotels = [\n"
    "    {'name': 'Memmo Alfama', 'area': 'Alfama', 'eur_per_night': 210},\n"
    "    {'name': 'The Lumiares', 'area': 'Bairro Alto', 'eur_per_night': 260},\n"
    "    {'name': 'Bairro Alto Hotel', 'area': 'Chiado', 'eur_per_night': 340},\n"
    "    {'name': 'Lisboa Pessoa', 'area': 'Baixa', 'eur_per_night': 190},\n"
    "]\n"
    "print('\\n'.join(f\"{h['name']:<18} {h['area']:<12} {h['eur_per_night']} EUR\"\n"
    "                for h in sorted(hotels, key=lambda h: h['eur_per_night'])))"
)
HOTEL_ANSWER = _answer(
    "where to stay",
    [
        "Alfama: old, hilly, atmospheric; Memmo Alfama has a rooftop pool.",
        "Bairro Alto / Chiado: central and lively at night; The Lumiares and Bairro Alto Hotel.",
        "Baixa: flat and well connected; Lisboa Pessoa is good value.",
        "Avoid staying right on the main tram 28 route if you are a light sleeper.",
        "Book early for May: long weekends fill the small boutique hotels first.",
        "I saved the shortlist in the `hotels` variable in the kernel so we can come back to it.",
    ],
)


SHORTLIST = (
    "Memmo Alfama (210 EUR), The Lumiares (260 EUR), Bairro Alto Hotel (340 EUR), Lisboa Pessoa (190 EUR)"
)


def _summary(number: int, focus: bool) -> str:
    """The scripted summarizer's checkpoint: pi's sections (and the split-turn ones), kept short."""
    critical = (
        (f"- Hotel shortlist, also in the kernel variable `hotels`: {SHORTLIST}.") if focus else "- (none)"
    )
    return (
        f"## Goal\nPlan a week in Lisbon in May (summary #{number}).\n\n"
        "## Constraints & Preferences\n- Travelling in May.\n\n"
        "## Progress\n### Done\n- [x] Weather, packing, where to stay, food, day trips.\n"
        "### In Progress\n- [ ] The rest of the plan.\n### Blocked\n- (none)\n\n"
        "## Key Decisions\n- Stay central (Alfama, Bairro Alto, Baixa).\n\n"
        "## Next Steps\n1. Answer the next question.\n\n"
        f"## Critical Context\n{critical}\n\n"
        "## Original Request\nThe current question.\n\n## Early Progress\n- (none)\n\n"
        "## Context for Suffix\n- (none)"
    )


class Script:
    """Plays both models: the travel planner (by the last question) and the summarizer (by its
    system prompt), each answer a function of the request.

    The planner "thinks" while a compaction runs beside it: an answer requested while a
    background compaction is in flight, and the answer to the busy question, are held until that
    compaction's summary is queued (at most ``busy_timeout`` seconds). That makes the run the same
    every time, however loaded the machine is.
    """

    def __init__(self, busy_timeout: float) -> None:
        self.busy_timeout = busy_timeout
        self.overflow_sent = False
        self.summaries = 0
        self.focus_seen: list[str] = []
        self.lock = threading.Lock()
        self.hold: threading.Event | None = None  # set when the running background summary is queued
        self.busy_started = threading.Event()  # the busy question reached the model
        self.manual_queued = threading.Event()  # the manual summary waits in the inbox

    def __call__(self, req: RecordedRequest) -> Reply:
        messages = req.messages
        system = (
            str(messages[0].get("content", "")) if messages and messages[0].get("role") == "system" else ""
        )
        if system.startswith(SUMMARIZER_PROMPT[:40]):
            prompt = str(messages[-1].get("content", ""))
            with self.lock:
                if "## Original Request\n[" not in prompt:  # a split turn's prefix call is not a new summary
                    self.summaries += 1
                focus = "Keep the hotel shortlist" in prompt
                if focus:
                    self.focus_seen.append("Keep the hotel shortlist")
                return Reply(text=_summary(self.summaries, focus))
        last_user = max(
            (
                i
                for i, m in enumerate(messages)
                if m.get("role") == "user"
                and not str(m.get("content", "")).startswith(("Earlier parts", "<ipython"))
            ),
            default=-1,
        )
        question = str(messages[last_user].get("content", "")) if last_user >= 0 else ""
        index = next((i for i, q in enumerate(QUESTIONS) if q == question), None)
        after = messages[last_user + 1 :] if last_user >= 0 else []
        if index is None:
            return Reply(text="I am not sure what you are asking.")
        if index == 1:
            if not any(m.get("role") == "tool" for m in after):
                return Reply(
                    text="Let me save a shortlist first.",
                    tool_calls=(ToolCall("python", {"code": HOTEL_CODE}),),
                )
            return Reply(text=HOTEL_ANSWER)
        if index == OVERFLOW_QUESTION:
            with self.lock:
                if not self.overflow_sent:
                    self.overflow_sent = True
                    return Reply(
                        status=400,
                        error_type="invalid_request_error",
                        error_code="context_length_exceeded",
                        error_message=(
                            f"This model's maximum context length is {WINDOW} tokens. However, "
                            f"your messages "
                            "resulted in 3112 tokens. Please reduce the length of the messages."
                        ),
                    )
        hold = self.hold
        if hold is not None:
            hold.wait(self.busy_timeout)
        if index == BUSY_QUESTION:
            self.busy_started.set()
            self.manual_queued.wait(self.busy_timeout)
        return Reply(text=ANSWERS[index])


SYSTEM_PROMPT = "You are a friendly travel planner. Keep notes in Python variables when useful."


@dataclass
class Row:
    question: int
    label: str
    context_messages: int
    log_entries: int
    context_tokens: int
    server_tokens: int = 0
    """The next request as the server's tokenizer counts it (its messages and the tool schemas): one
    unit from the first question to the last (the agent's own figure changes unit once it has learned
    the server's tokenizer from usage)."""


@dataclass
class TravelReport:
    rows: list[Row] = field(default_factory=list)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    inbox_while_busy: list[dict[str, Any]] = field(default_factory=list)
    live_while_busy: list[dict[str, Any]] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    kernel_notice: str | None = None
    focus_reached_summarizer: bool = False
    db_path: str = ""


def run(
    db_path: Path, *, busy_timeout: float = 30.0, echo: bool = True, settings: CompactionSettings = SETTINGS
) -> TravelReport:
    """Run the whole example against a fresh session log at ``db_path``."""
    report = TravelReport(db_path=str(db_path))

    def say(text: str) -> None:
        report.events.append(text)
        if echo:
            print(text, flush=True)

    def on_event(ev: AgentEvent) -> None:
        if ev.kind == "compaction_start" and ev.text.startswith("background"):
            script.hold = threading.Event()
        elif ev.kind in ("compaction_queued", "compaction_end"):  # done, one way or another
            if ev.data.get("reason") == "manual":
                script.manual_queued.set()
            elif script.hold is not None:
                script.hold.set()
                script.hold = None
        if ev.kind in (
            "compaction_start",
            "compaction_end",
            "compaction_queued",
            "compaction_stale",
            "overflow",
            "guard",
        ):
            say(f"    · {ev.kind}: {ev.text}")

    store = SessionStore(db_path)
    script = Script(busy_timeout)
    with (
        ModelServer(script, model="travel-model", context_window=WINDOW) as server,
        JupyterKernel(extension=None, env={"IPYTHON_COMPACT_DIR": str(db_path.parent)}) as kernel,
    ):
        client = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
        agent = Agent(
            store=store,
            session="lisbon",
            client=client,
            model="travel-model",
            provider="local",
            context_window=WINDOW,
            settings=settings,
            kernel=kernel,
            compactor=Compactor(
                store,
                OpenAISummarizer("travel-model", base_url=server.base_url, api_key="local", max_retries=0),
                settings,
            ),
            system_prompt=SYSTEM_PROMPT,
            on_event=on_event,
            snapshot_dir=str(db_path.parent / "snapshots"),
        )
        for i, question in enumerate(QUESTIONS):
            label = f"Q{i + 1}"
            say(f"{label}: {question}")
            if i == BUSY_QUESTION:

                def ask_manual() -> None:
                    script.busy_started.wait(busy_timeout)
                    say("    (model is busy answering; requesting compact('Keep the hotel shortlist'))")
                    agent.compact("Keep the hotel shortlist")
                    report.live_while_busy = [
                        {"task_id": c.task_id, "reason": c.reason, "blocking": c.blocking}
                        for c in store.live_status("lisbon").in_flight
                    ]
                    agent.wait_background()
                    say("    manual compaction finished; its summary is queued")
                    report.inbox_while_busy = [
                        {
                            "item_id": it.item_id,
                            "state": it.state,
                            "first_kept_entry_id": it.first_kept_entry_id,
                            "reason": it.payload.get("reason"),
                        }
                        for it in store.inbox_items("lisbon")
                    ]

                helper = threading.Thread(target=ask_manual)
                helper.start()
                result = agent.ask(question)
                helper.join()
                say("    after the answer, the summary is placed")
            else:
                result = agent.ask(question)
                agent.wait_background()
            report.answers.append(result.text)
            if result.stopped != "final":
                raise RuntimeError(f"{label} ended with {result.stopped}: {result.text}")
            ctx, log = agent.counts()
            tokens = agent.context_tokens()[0]
            # what the server would count for the next request: its messages and the tool schemas
            counted = estimate_prompt_tokens({"messages": agent.context_messages(), "tools": [PYTHON_TOOL]})
            report.rows.append(Row(i + 1, label, ctx, log, tokens, counted))
            say(f"    -> context messages: {ctx}   log entries: {log}   context tokens: {tokens}")
        for e in store.entries("lisbon"):
            if e.kind == COMPACTION:
                report.compactions.append(
                    {
                        "id": e.id,
                        "head": e.data.get("first_kept_entry_id"),
                        "reason": e.data.get("reason"),
                        "blocking": (e.data.get("details") or {}).get("blocking"),
                        "focus": (e.data.get("details") or {}).get("focus"),
                        "summary": str(e.data.get("summary", "")),
                    }
                )
            if e.kind == KERNEL_STATE:
                report.kernel_notice = str(e.data.get("content"))
        report.focus_reached_summarizer = bool(script.focus_seen)
        if echo:
            print_report(report, store)
    store.close()
    return report


def print_report(report: TravelReport, store: SessionStore) -> None:
    print()
    print(
        f"{'after':<8}{'context messages':>18}{'log entries':>14}{'context tokens':>16}{'server counts':>15}"
    )
    for row in report.rows:
        print(
            f"{row.label:<8}{row.context_messages:>18}{row.log_entries:>14}{row.context_tokens:>16}"
            f"{row.server_tokens:>15}"
        )
    print()
    print("compaction entries (SELECT id, head, reason FROM entries WHERE kind = 'compaction'):")
    print(f"{'id':<12}{'head':<12}{'reason':<11}{'blocking':<9}focus")
    for c in report.compactions:
        head = str(c["head"])[:10]
        print(f"{c['id'][:10]:<12}{head:<12}{c['reason']:<11}{c['blocking']!s:<9}{c['focus'] or ''}")
    manual = next((c for c in report.compactions if c["reason"] == "manual"), None)
    if manual is not None:
        print()
        print("the manual compaction's summary (first lines):")
        for line in manual["summary"].splitlines()[:12]:
            print(f"    {line}")
    if report.kernel_notice:
        print()
        print("the newest <ipython_state> notice:")
        print("    " + report.kernel_notice.replace("\n", "\n    "))
    if report.live_while_busy or report.inbox_while_busy:
        print()
        print("while the model was busy answering Q6:")
        print(f"    live compactions: {json.dumps(report.live_while_busy)}")
        print(f"    inbox:            {json.dumps(report.inbox_while_busy)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="session database (default: a fresh temporary file)")
    parser.add_argument(
        "--json", action="store_true", help="print the table and compactions as JSON at the end"
    )
    args = parser.parse_args(argv)
    db = args.db or Path(tempfile.mkdtemp(prefix="travel-")) / "session.db"
    if db.exists():
        print(f"refusing to reuse {db}: the example builds a fresh log", file=sys.stderr)
        return 2
    report = run(db)
    print(f"\nsession log: {db}")
    if args.json:
        print(
            json.dumps(
                {
                    "rows": [r.__dict__ for r in report.rows],
                    "compactions": [
                        {k: v for k, v in c.items() if k != "summary"} for c in report.compactions
                    ],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["QUESTIONS", "Row", "TravelReport", "main", "run", "text_of_content"]
