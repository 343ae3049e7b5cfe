"""One request to the model: send the messages, read the answer or the error, nothing else.

Why a component: what can go wrong on the wire (status errors with provider-specific bodies,
timeouts, an error event mid-stream, an unreadable answer, an interrupt while streaming) is its
own concern. The caller turns every outcome into one ``ModelAnswer``; the turn loop decides what
it means (log it, recover from an overflow, stop). It never touches the session log, so it is
tested with a fake client.

What must hold:
- Exactly one of ``message`` / ``error_text`` is set on an answer.
- A stream stopped by ``abort`` yields what arrived, marked ``aborted`` (and ``stopReason:
  aborted`` on the message, so it is never sent again nor used as a usage anchor). ``abort`` is
  seen while the server is silent too (streamed or not): an interrupt never waits for a reply.
- ``requests`` and ``tokens`` count what this caller sent and was billed (reported usage), under
  its own lock, so a budget can be checked from any thread.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ipython_compact.agent.openai_chat import PYTHON_TOOL, StreamAccumulator, from_openai_completion
from ipython_compact.agent.session_log import now_iso
from ipython_compact.core.entries import JSON
from ipython_compact.core.surrogates import notice, repair_text, repair_value

LOG = logging.getLogger("ipython_compact")


def _endpoint(exc: Exception) -> str | None:
    """The URL the failed request went to (``openai`` errors carry their ``httpx.Request``)."""
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    return str(url) if url is not None else None


def served_models(client: Any, timeout: float = 5.0) -> list[str] | None:
    """The model ids the server lists at ``/v1/models``, or None when it cannot be asked (one quick
    try: this runs only to explain an error)."""
    try:
        listing = (
            client.with_options(timeout=timeout, max_retries=0) if hasattr(client, "with_options") else client
        )
        page = listing.models.list()
        items = list(getattr(page, "data", None) or page)
    except Exception:
        return None
    return [str(getattr(m, "id", None) or (m.get("id") if isinstance(m, dict) else m)) for m in items]


def describe_api_error(exc: Exception, client: Any = None, model: str | None = None) -> str:
    """One line saying what went wrong and where, for an ``openai`` client exception.

    A server that cannot be reached names the URL; a refusal states the HTTP status and the
    server's message (401/403: how to give the key); a model the server does not serve lists the
    models it does serve (asked from ``client`` when given). The server's own text is kept, so an
    overflow refusal still reads as one (``core.overflow``)."""
    import openai  # deferred for start-up time (heavy); loaded already when an openai call raised

    where = _endpoint(exc) or str(getattr(client, "base_url", "") or "the model server")
    if isinstance(exc, openai.APITimeoutError):
        return f"no answer from the model server at {where} (timed out)"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        why = f"{type(cause).__name__}: {cause}" if cause is not None and str(cause) else str(exc)
        return f"cannot reach the model server at {where} ({why}); is it running, and is base_url right?"
    if isinstance(exc, openai.APIStatusError):
        text, code, status = _status_details(exc)
        line = f"HTTP {status} from {where}: {text}"
        if status in (401, 403):
            return line + " — check the API key (api_key=... or $OPENAI_API_KEY)"
        if (
            status == 404
            and model is not None
            and (code in ("model_not_found", "not_found_error") or "model" in text.lower())
        ):
            served = served_models(client) if client is not None else None
            if served:
                line += f" — the server serves: {', '.join(served)}; pass one of them as the model"
        return line
    return f"{type(exc).__name__}: {exc}"


def _status_details(exc: Any) -> tuple[str, str | None, int]:
    body = exc.body if isinstance(exc.body, dict) else {}
    err = body.get("error", body) if isinstance(body, dict) else {}
    code = err.get("code") if isinstance(err, dict) else None
    text = str(err.get("message")) if isinstance(err, dict) and err.get("message") else str(exc)
    return text, code if isinstance(code, str) else None, int(exc.status_code)


def api_error_details(
    exc: Exception, client: Any = None, model: str | None = None
) -> tuple[str, str | None, int | None]:
    """(message text, provider error code, HTTP status) of an ``openai`` client exception; the text
    is ``describe_api_error``'s (it names the URL and the status)."""
    import openai  # deferred for start-up time (heavy); loaded already when an openai call raised

    text = describe_api_error(exc, client, model)
    if isinstance(exc, openai.APIStatusError):
        _, code, status = _status_details(exc)
        return text, code, status
    code = getattr(exc, "code", None)  # e.g. an error event in the middle of a stream
    return text, code if isinstance(code, str) else None, None


@dataclass(frozen=True)
class ModelAnswer:
    """The outcome of one request: the assistant message, or an error (text, code, HTTP status)."""

    message: JSON | None = None
    aborted: bool = False
    error_text: str | None = None
    error_code: str | None = None
    error_status: int | None = None


class ModelCaller:
    """Sends chat requests through an ``openai.OpenAI``-like ``client`` (``chat.completions.create``)."""

    def __init__(
        self,
        client: Any,
        *,
        request_timeout: float = 120.0,
        stream: bool = False,
        tools: Sequence[JSON] = (PYTHON_TOOL,),
    ) -> None:
        self.client = client
        self.request_timeout = request_timeout
        self.stream = stream
        self.tools = list(tools)
        self._lock = threading.Lock()
        self._requests = 0
        self._tokens = 0
        self._max_tokens_refused = False  # the server said no to max_tokens once: not sent again

    @property
    def requests(self) -> int:
        with self._lock:
            return self._requests

    @property
    def tokens(self) -> int:
        """Total tokens the server reported for this caller's answers (prompt + completion)."""
        with self._lock:
            return self._tokens

    def call(
        self,
        messages: list[JSON],
        *,
        model: str,
        provider: str,
        abort: threading.Event | None = None,
        on_delta: Callable[[str], None] | None = None,
        max_tokens: int | None = None,
    ) -> ModelAnswer:
        """Send ``messages``; see ``ModelAnswer``. ``on_delta`` gets streamed text pieces.
        ``max_tokens`` bounds the reply; a server that refuses the parameter (an HTTP 400 naming
        it) is asked again without it, and never sent it again by this caller."""
        import openai  # lazy for start-up time: the agent package is imported by the kernel extension

        with self._lock:
            self._requests += 1
        aborted = False
        extra = {} if max_tokens is None or self._max_tokens_refused else {"max_tokens": max_tokens}
        try:
            try:
                completion, aborted = self._send(messages, model, abort, on_delta, extra)
            except openai.BadRequestError as exc:
                if not extra or "max_tokens" not in str(exc):
                    raise
                self._max_tokens_refused = True
                LOG.warning(
                    "ipython_compact: the server refused max_tokens=%s; replies are not bounded", max_tokens
                )
                completion, aborted = self._send(messages, model, abort, on_delta, {})
            if completion is None:
                return ModelAnswer(aborted=True, error_text="the turn was interrupted")
        except openai.APIError as exc:
            text, code, status = api_error_details(exc, self.client, model)
            return ModelAnswer(error_text=text, error_code=code, error_status=status)
        try:
            message = from_openai_completion(completion, provider=provider, model=model, timestamp=now_iso())
        except (ValueError, TypeError, AttributeError) as exc:
            return ModelAnswer(error_text=f"the server's answer could not be read: {exc}")
        message, replaced = repair_value(message)  # half an emoji: as the importer keeps it (U+FFFD)
        if replaced:
            LOG.warning("ipython_compact: %s", notice(replaced, f"the reply of model {model!r}"))
        if aborted:
            message["stopReason"] = "aborted"  # logged, never sent again, never a usage anchor
        usage = message.get("usage")
        if isinstance(usage, dict):
            with self._lock:
                self._tokens += int(usage.get("totalTokens") or 0)
        return ModelAnswer(message=message, aborted=aborted)

    def _send(
        self,
        messages: list[JSON],
        model: str,
        abort: threading.Event | None,
        on_delta: Callable[[str], None] | None,
        extra: dict[str, Any],
    ) -> tuple[Any, bool]:
        """One request: (the completion, or None when it was interrupted before anything came;
        whether it was cut short)."""

        def create(**more: Any) -> Any:
            return self.client.chat.completions.create(
                model=model,
                messages=messages,
                tools=self.tools,
                timeout=self.request_timeout,
                **extra,
                **more,
            )

        if self.stream:
            return self._streamed(create, abort, on_delta)
        completion = _until_aborted(create, abort)
        return (None, True) if completion is _ABANDONED else (completion, False)

    def _streamed(
        self,
        create: Callable[..., Any],
        abort: threading.Event | None,
        on_delta: Callable[[str], None] | None,
    ) -> tuple[JSON | None, bool]:
        """Stream one answer; stops early, and says so, when ``abort`` is set.

        The request is read on a thread of its own and its chunks are handed over here, so an
        abort is seen while the server is still silent (before its first chunk, or stalled
        between two), not only between chunks. Returns ``(None, True)`` when it was aborted
        before anything arrived; otherwise what arrived, and whether it was cut short."""
        acc = StreamAccumulator()
        stop = threading.Event()
        chunks = _read_stream(lambda: create(stream=True, stream_options={"include_usage": True}), stop)
        received = 0
        try:
            while True:
                item = _next_item(chunks, abort)
                if item is _ABANDONED:
                    return (acc.completion() if received else None), True
                kind, value = item
                if kind == "end":
                    return acc.completion(), False
                if kind == "error":
                    raise value
                received += 1
                delta = acc.add(value)
                if delta and on_delta is not None:
                    on_delta(repair_text(delta)[0])  # printable: the logged reply is repaired whole
                if abort is not None and abort.is_set():
                    return acc.completion(), True
        finally:
            stop.set()  # the reading thread closes the stream at its next chunk (or its end)


def _read_stream(open_stream: Callable[[], Any], stop: threading.Event) -> queue.Queue[tuple[str, Any]]:
    """Open the stream and read it on a daemon thread: ``("chunk", c)`` items, then ``("end",
    None)`` or ``("error", exc)``. Stops reading, and closes the stream, once ``stop`` is set.
    Why a thread: a blocked read cannot be interrupted, so the waiting side must not be the one
    reading; an abandoned read finishes there on its own (at the latest at the request timeout)."""
    items: queue.Queue[tuple[str, Any]] = queue.Queue()

    def run() -> None:
        stream = None
        try:
            stream = open_stream()
            for chunk in stream:
                if stop.is_set():
                    break
                items.put(("chunk", chunk))
            items.put(("end", None))
        except BaseException as exc:  # handed to the waiting caller
            items.put(("error", exc))
        finally:
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()

    threading.Thread(target=run, name="model-stream", daemon=True).start()
    return items


def _next_item(items: queue.Queue[tuple[str, Any]], abort: threading.Event | None) -> Any:
    """The next item of a stream read by ``_read_stream``, or ``_ABANDONED`` once ``abort`` is set."""
    if abort is None:
        return items.get()
    while True:
        if abort.is_set():  # also while chunks keep coming: an interrupt wins over the next chunk
            return _ABANDONED
        try:
            return items.get(timeout=0.05)  # checks the abort flag between short waits
        except queue.Empty:
            if abort.is_set():
                return _ABANDONED


_ABANDONED = object()


def _until_aborted(request: Callable[[], Any], abort: threading.Event | None) -> Any:
    """``request()``, or ``_ABANDONED`` as soon as ``abort`` is set while it waits for the server.

    Why: a non-streamed request gives no chance to stop between chunks, so an interrupt (a
    cancelled ``aask``, ``Agent.interrupt``) would wait for the whole answer. The request runs on
    a daemon thread; an abandoned one finishes there on its own and its answer is dropped (never
    logged, never sent again). Its exception, when it is not abandoned, is raised here.
    """
    if abort is None:
        return request()
    box: dict[str, Any] = {}
    finished = threading.Event()

    def run() -> None:
        try:
            box["value"] = request()
        except BaseException as exc:  # handed to the waiting caller
            box["error"] = exc
        finally:
            finished.set()

    threading.Thread(target=run, name="model-request", daemon=True).start()
    while not finished.wait(0.05):  # checks the abort flag between short waits for the answer
        if abort.is_set():
            return _ABANDONED
    if "error" in box:
        raise box["error"]
    return box["value"]
