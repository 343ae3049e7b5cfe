"""Estimates that learn the model's tokenizer: the server's tokenize endpoint, else usage deltas.

Why: the agent decides whether the next request fits (and when to compact) from the newest usage
anchor plus *estimates* of what was added since. The density estimate is far from small models'
tokenizers (through SmolLM2, digits are estimated at a quarter of their real count), so after one
large numeric tool output the agent believed it had room it did not have, and the server refused
the request. Two sources correct it, per session and model:

- **tokenizer**: a server with a tokenize endpoint — llama-cpp-python's server
  (``POST /extras/tokenize/count`` with ``{"input", "model"}`` → ``{"count"}``, read from its
  ``llama_cpp/server/app.py`` 0.3.36) or vLLM's (``POST /tokenize`` with ``{"model", "prompt"}``
  → ``{"count"}``) — counts each added message exactly (cached by entry id);
- **calibrated**: otherwise each answered request's prompt tokens, minus the usage anchor the
  estimate started from, is the real size of what was added since; it is observed against the
  estimate of those entries under their dominant content class (the other classes at the ratios
  already learned; ``core.token_calibration``), and later estimates of that class are scaled by the
  learned ratio.

A request also carries what is not in its messages: the tool schemas, the template's framing of
each message (``MESSAGE_OVERHEAD``) and the reply primer. A usage anchor includes them; a request
with no anchor (the first one, and the first after each compaction) does not tell them apart from
the messages. Counted as message tokens, they taught the travel example's first request a prose
ratio of 1.55 (367 real for 237 estimated, a third of it the tool schema), and after the next
compaction the estimate was 45% over the server's count. So:

- a request without an anchor teaches a ratio only as the first thing learned, only after the
  fixed part is taken off (the tool schemas the agent sends, ``fixed_text``, estimated and
  corrected like any text, plus the framing; or the framing alone when with the schemas the ratio
  is implausible: llama.cpp's default chat formats do not render tools), and only provisionally:
  the first usage delta of that class replaces it. It always teaches the *fixed overhead*, kept as
  that observation and recomputed with the ratios learned since (what it cost minus its messages
  at the current ratios), which estimates without an anchor then add (before one was seen, the
  reply primer alone);
- only the newest ``system`` entry of the view is counted (the request carries that one; an older
  baseline kept in the tail after a compaction was counted twice).

What must hold:
- The endpoint is probed once per learner, on its own thread, each request bounded by
  ``deadline`` seconds; nothing waits for the probe (until it answers, estimates are calibrated
  or default). A count that fails later falls back to the calibrated estimate for that message.
- Nothing here runs in or waits for the kernel; the HTTP calls go to the model server only.
- A usage delta teaches only when at least ``LEAST_LEARNED`` tokens were estimated since the
  anchor and real ÷ estimated lies within [1/6, 6] (the widest seen: digits through SmolLM2, 4×).
- Before anything is learned (``default``) the estimate is the stored estimates', superseded
  system baselines left out; framing and overhead are added only once learned from this server.
- ``describe()`` says which estimate is in force: ``tokenizer (<route>)``, ``calibrated ×F after
  N requests``, or ``default (<estimator>)``.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ipython_compact.core.entries import SYSTEM, Entry, text_of_content
from ipython_compact.core.messages import entry_message, in_context
from ipython_compact.core.token_calibration import Calibration, content_class
from ipython_compact.core.tokens import ContextEstimate, estimate_context, estimate_message_tokens
from ipython_compact.core.view import view_indices

__all__ = ["TOKENIZE_ROUTES", "TokenLearner", "attach_learner", "learner_for", "sent_counts"]


def _llama_cpp_body(model: str, text: str) -> dict[str, Any]:
    return {"input": text, "model": model}


def _vllm_body(model: str, text: str) -> dict[str, Any]:
    return {"model": model, "prompt": text}


#: (route, request body maker) tried in order; the first that answers a count is used.
TOKENIZE_ROUTES: Final[tuple[tuple[str, Callable[[str, str], dict[str, Any]]], ...]] = (
    ("/extras/tokenize/count", _llama_cpp_body),  # llama-cpp-python's server
    ("/tokenize", _vllm_body),  # vLLM
)
#: Tokens a chat template adds around each message (role markers, separators), on top of its text.
MESSAGE_OVERHEAD: Final = 4
#: Tokens a chat template adds once per request to prime the reply (the assistant's role marker).
REPLY_PRIMER: Final = 3
#: Fewer estimated tokens added since the anchor than this teach nothing (template overhead dominates).
LEAST_LEARNED: Final = 64
#: A usage delta further than this from the estimate (either way) is not a tokenizer's doing.
WILDEST_RATIO: Final = 6.0
PROBE_TEXT: Final = "How many tokens are in this short probe sentence? 12345"


def _message_text(entry: Entry) -> str:
    """The text an entry puts in the request: its content (a summary's text) plus any tool-call names
    and arguments."""
    message = entry_message(entry)
    if not message:
        return ""
    parts = [text_of_content(message.get("content")), str(message.get("summary") or "")]
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            fn = call.get("function") or call
            parts.append(f"{fn.get('name', '')} {fn.get('arguments', '')}")
    return "\n".join(p for p in parts if p)


@dataclass(frozen=True)
class _BareRequest:
    """A request that had no usage anchor: its messages' estimates by class (``exact``: the
    tokenizer-counted ones, framing included), how many were framed on top, what it cost."""

    estimated: dict[str, int]
    exact: int
    framed: int
    prompt: int


def sent_counts(path: Sequence[Entry], counts: Sequence[int]) -> list[int]:
    """``counts`` with every ``system`` entry of the view but the newest at 0: the request carries
    only the newest baseline (``context_report.request_messages``)."""
    out = list(counts)
    systems = [i for i in view_indices(path) if path[i].kind == SYSTEM]
    for i in systems[:-1]:
        out[i] = 0
    return out


def _added(path: Sequence[Entry], base: ContextEstimate) -> Sequence[int]:
    """Indices of what ``base`` estimated rather than read from usage: after the anchor, else the view."""
    if base.last_usage_index is None:
        return view_indices(path)
    return range(base.last_usage_index + 1, len(path))


class TokenLearner:
    """Per-session, per-model corrections of the agent's context estimate (see the module docstring).

    ``root_url`` is the server's address without ``/v1`` (None: no endpoint to probe)."""

    def __init__(
        self, root_url: str | None, model: str, estimator: str, *, deadline: float = 2.0, fixed_text: str = ""
    ) -> None:
        self.root_url = root_url.rstrip("/") if root_url else None
        self.model = model
        self.estimator = estimator
        self.deadline = deadline
        self.fixed_text = fixed_text
        """What every request carries besides its messages (the tool schemas, as JSON)."""
        self.calibration = Calibration()
        self.requests = 0  # answered requests whose usage was learned from
        self.route: str | None = None
        self.probed = threading.Event()  # set when the probe has answered either way (tests wait on it)
        self._exact: dict[str, int] = {}
        self._bare: _BareRequest | None = None  # the newest request sent without a usage anchor
        self._provisional: tuple[str, int, int] | None = None  # what the first request taught
        self._lock = threading.Lock()
        if self.root_url is None:
            self.probed.set()
        else:
            threading.Thread(target=self._probe, name="tokenize-probe", daemon=True).start()

    # ------------------------------------------------------------------ the endpoint
    def _post(self, route: str, body: dict[str, Any]) -> int | None:
        request = urllib.request.Request(
            f"{self.root_url}{route}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.deadline) as response:
                got = json.loads(response.read())
        except (OSError, ValueError, urllib.error.URLError):
            return None
        count = got.get("count") if isinstance(got, dict) else None
        if count is None and isinstance(got, dict) and isinstance(got.get("tokens"), list):
            count = len(got["tokens"])
        return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None

    def _probe(self) -> None:
        try:
            for route, body in TOKENIZE_ROUTES:
                if self._post(route, body(self.model, PROBE_TEXT)):
                    self.route = route
                    return
        finally:
            self.probed.set()

    def _count(self, text: str) -> int | None:
        route = self.route
        if route is None:
            return None
        body = dict(TOKENIZE_ROUTES)[route](self.model, text)
        return self._post(route, body)

    # ------------------------------------------------------------------ estimates
    def entry_tokens(self, entry: Entry, estimate: int) -> int:
        """``estimate`` of ``entry`` replaced by the tokenizer's count, else corrected by its class."""
        text = _message_text(entry) if estimate > 0 else ""
        if not text:
            return estimate  # puts nothing in the context, or nothing countable
        with self._lock:
            exact = self._exact.get(entry.id)
        if exact is None and self.route is not None:
            counted = self._count(text)
            if counted is not None:
                exact = counted + MESSAGE_OVERHEAD
                with self._lock:
                    self._exact[entry.id] = exact
                    self.calibration.observe(content_class(text), estimate, exact)
        if exact is not None:
            return exact
        return self.calibration.corrected(text, estimate)

    def learned(self) -> bool:
        """Whether anything was learned from this server (before that, estimates stay the default)."""
        return self.route is not None or self.requests > 0 or self._bare is not None

    def _cost(self, entry: Entry, estimate: int) -> int:
        """What ``entry`` adds to a request: its tokens, plus the template's framing once learned."""
        tokens = self.entry_tokens(entry, estimate)
        if tokens <= 0 or not self.learned():
            return tokens
        with self._lock:
            exact = entry.id in self._exact
        return tokens if exact else tokens + MESSAGE_OVERHEAD

    def overhead(self) -> int:
        """Tokens a request costs besides its messages (0 before anything is learned): from the newest
        request without an anchor at today's ratios, else the tool schemas' estimate and the primer."""
        if not self.learned():
            return 0
        with self._lock:
            bare = self._bare
        if bare is None:
            return REPLY_PRIMER  # whether the server renders the tool schemas is not known yet
        believed = bare.exact + sum(
            round(est * self.calibration.ratio(cls)) for cls, est in bare.estimated.items()
        )
        return max(0, bare.prompt - believed - MESSAGE_OVERHEAD * bare.framed)

    def _fixed_guesses(self) -> list[int]:
        """What a first request may cost besides its messages: the tool schemas and the primer (a
        server that renders them), else the primer alone (one that does not: llama.cpp's default
        chat formats)."""
        if not self.fixed_text:
            return [REPLY_PRIMER]
        est = estimate_message_tokens({"role": "user", "content": self.fixed_text}, self.estimator)
        return [self.calibration.corrected(self.fixed_text, est) + REPLY_PRIMER, REPLY_PRIMER]

    def context(self, path: Sequence[Entry], counts: Sequence[int]) -> ContextEstimate:
        """The context estimate of ``path`` with each entry after the usage anchor learned-corrected;
        without an anchor, the request's fixed overhead is added."""
        sent = sent_counts(path, counts)
        corrected = list(sent)
        base = estimate_context(path, self.estimator, tokens=sent)
        for i in _added(path, base):
            if in_context(path[i]):
                corrected[i] = self._cost(path[i], sent[i])
        est = estimate_context(path, self.estimator, tokens=corrected)
        if est.last_usage_index is not None:
            return est
        extra = self.overhead()
        return ContextEstimate(est.tokens + extra, est.usage_tokens, est.trailing_tokens + extra, None)

    # ------------------------------------------------------------------ usage deltas
    def learn(self, path: Sequence[Entry], counts: Sequence[int], prompt_tokens: int) -> None:
        """A request built from ``path`` (with raw per-entry estimates ``counts``) cost
        ``prompt_tokens``: what was added since the usage anchor is observed under its dominant class
        (see the module docstring for a request without an anchor)."""
        if prompt_tokens <= 0:
            return
        sent = sent_counts(path, counts)
        base = estimate_context(path, self.estimator, tokens=sent)
        estimated: dict[str, int] = {}  # what was added, by class, estimated
        exact = framed = 0  # tokens of added entries the tokenizer counted; entries framed on top
        for i in _added(path, base):
            if not in_context(path[i]) or sent[i] <= 0:
                continue
            with self._lock:
                counted = self._exact.get(path[i].id)
            if counted is not None:
                exact += counted
                continue
            cls = content_class(_message_text(path[i]))
            estimated[cls] = estimated.get(cls, 0) + sent[i]
            framed += 1
        if base.last_usage_index is None:
            first = not self.learned()
            with self._lock:
                self._bare = _BareRequest(dict(estimated), exact, framed, prompt_tokens)
            if not first:
                return  # teaches the overhead only: ratios come from usage deltas
            for fixed in self._fixed_guesses():  # a provisional ratio, until a usage delta teaches one
                real = prompt_tokens - fixed - exact - MESSAGE_OVERHEAD * framed
                self._provisional = self._observe_mixed(estimated, real)
                if self._provisional is not None:
                    return
            return
        real = prompt_tokens - base.usage_tokens - exact - MESSAGE_OVERHEAD * framed
        self._observe_mixed(estimated, real)

    def _observe_mixed(self, estimated: Mapping[str, int], real: int) -> tuple[str, int, int] | None:
        """Observe ``real`` tokens for what was ``estimated`` by class: the dominant class gets what
        the others, at their learned ratios, leave of it. The observation made, if any."""
        total = sum(estimated.values())
        if total < LEAST_LEARNED or real <= 0:
            return None  # too little was added to tell a tokenizer from a template's fixed cost
        if not 1 / WILDEST_RATIO <= real / total <= WILDEST_RATIO:
            return None  # no tokenizer is that far off: the usage does not describe these entries
        dominant = max(estimated, key=lambda c: estimated[c])
        with self._lock:
            if self._provisional is not None and self._provisional[0] == dominant:
                self.calibration.forget(*self._provisional)  # a usage delta knows better
                self._provisional = None
            rest = sum(est * self.calibration.ratio(c) for c, est in estimated.items() if c != dominant)
            own = round(real - rest)
            if own <= 0 or not 1 / WILDEST_RATIO <= own / estimated[dominant] <= WILDEST_RATIO:
                own = real * estimated[dominant] // total  # the others' ratios do not fit: share alike
            self.calibration.observe(dominant, estimated[dominant], own)
            self.requests += 1
        return dominant, estimated[dominant], own

    def learn_usage(self, path: Sequence[Entry], counts: Sequence[int], usage: Any) -> None:
        """``learn`` from an assistant message's pi-shaped ``usage`` (prompt = input + cache reads
        and writes); nothing when the server reported none."""
        if not isinstance(usage, Mapping):
            return
        prompt = sum(
            int(v)
            for k in ("input", "cacheRead", "cacheWrite")
            if isinstance(v := usage.get(k), (int, float)) and not isinstance(v, bool)
        )
        self.learn(path, counts, prompt)

    # ------------------------------------------------------------------ status
    def factor(self) -> float:
        """Real ÷ estimated over everything observed (1.0 before any observation)."""
        est = sum(self.calibration.estimated.values())
        return sum(self.calibration.real.values()) / est if est else 1.0

    def mode(self) -> str:
        if self.route is not None:
            return "tokenizer"
        return "calibrated" if self.requests else "default"

    def describe(self) -> str:
        """Which estimate is in force, in words for status displays."""
        mode = self.mode()
        if mode == "tokenizer":
            return f"tokenizer ({self.route})"
        if mode == "calibrated":
            plural = "" if self.requests == 1 else "s"
            return f"calibrated ×{self.factor():.2f} after {self.requests} request{plural}"
        return f"default ({self.estimator})"


def learner_for(client: Any, model: str, estimator: str, fixed_text: str = "") -> TokenLearner:
    """A learner for ``model`` behind ``client`` (an openai client): its server is probed for a
    tokenize route unless it is OpenAI's own API, which has none. ``fixed_text``: what every request
    carries besides its messages (the tool schemas)."""
    url = str(getattr(client, "base_url", "") or "").rstrip("/")
    root = url.removesuffix("/v1") if url.startswith(("http://", "https://")) else ""
    probe = root and "api.openai.com" not in root
    return TokenLearner(root or None if probe else None, model, estimator, fixed_text=fixed_text)


def attach_learner(engine: Any, learner: TokenLearner) -> None:
    """Let a compaction engine that can take one (``Compactor.count_correction``) size its cut
    with ``learner``'s counts; an engine without that attribute is left as it is."""
    if hasattr(engine, "count_correction"):
        engine.count_correction = learner.entry_tokens
