/**
 * The right-side panel: context gauge, actions, live namespace table and the
 * compaction timeline for the notebook that has focus.
 *
 * The skeleton is built once (so the focus text a user is typing survives a
 * refresh) and each section is redrawn from the shown notebook's model when it
 * changes. Text a user typed (focus, recall) is kept per notebook. All text
 * from the kernel goes in through `textContent`.
 */
import { LabIcon } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { FLOOD_NOTE, NO_CONVERSATION_NOTE, NotebookModel, PanelModel } from './model';
import { NamespaceSection } from './namespace_view';
import { ICallNode, IRecallHit, isObject, Json } from './protocol';
import { formatTimestamp, formatTokens, plural, renderCompactionCard } from './summary';

/** Characters of a recall hit shown before "show all". */
export const RECALL_EXCERPT_CHARS = 360;

/** Characters of a long label (a session id, a path) kept; the head is cut, the tail is what differs. */
const LABEL_TAIL_CHARS = 36;

/** `…` plus the last characters of a long label (the full text goes in the tooltip). */
export function tail(text: string, keep: number = LABEL_TAIL_CHARS): string {
  return text.length <= keep ? text : `…${text.slice(text.length - keep + 1)}`;
}

/**
 * A session id short enough for one line: `notebook:/long/dir/x.ipynb` becomes
 * `notebook:…/x.ipynb` (the part that tells two notebooks apart); others keep their tail.
 */
export /** The session's name, shortened, with the full name on hover. */
function sessionLine(name: string): HTMLElement {
  const line = el('div', 'jp-IpythonCompact-session', `session ${shortSession(name)}`);
  line.title = name;
  return line;
}

function shortSession(session: string, keep: number = LABEL_TAIL_CHARS): string {
  if (session.length <= keep) {
    return session;
  }
  const slash = session.lastIndexOf('/');
  const colon = session.indexOf(':');
  if (slash > 0 && colon >= 0 && colon < slash) {
    const short = `${session.slice(0, colon + 1)}…${session.slice(slash)}`;
    if (short.length <= keep) {
      return short;
    }
  }
  return tail(session, keep);
}

/** The panel's id in the shell (used by the open command and the tests). */
export const PANEL_ID = 'ipython-compact-panel';

const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
  '<g class="jp-icon3" fill="#616161">' +
  '<path d="M4 3h16v2H4zM4 19h16v2H4z"/>' +
  '<path d="M12 6l4 4h-3v4h3l-4 4-4-4h3v-4H8z"/>' +
  '</g></svg>';

export const compactIcon = new LabIcon({ name: 'ipython-compact:compact', svgstr: ICON_SVG });

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function button(label: string, action: string, onClick: () => void): HTMLButtonElement {
  const b = el('button', 'jp-IpythonCompact-button jp-mod-styled', label);
  b.type = 'button';
  b.dataset.action = action;
  b.addEventListener('click', onClick);
  return b;
}

function section(title: string, name: string): { root: HTMLElement; head: HTMLElement; body: HTMLElement } {
  const root = el('section', `jp-IpythonCompact-section jp-IpythonCompact-${name}`);
  const head = el('div', 'jp-IpythonCompact-sectionHead');
  head.appendChild(el('h3', 'jp-IpythonCompact-sectionTitle', title));
  const body = el('div', 'jp-IpythonCompact-sectionBody');
  root.append(head, body);
  return { root, head, body };
}

const STATE_LABELS: Record<string, string> = {
  'no-notebook': 'no notebook',
  'no-kernel': 'no kernel',
  connecting: 'connecting',
  'not-loaded': 'not loaded',
  loading: 'loading',
  ready: 'connected',
  restarting: 'restarting',
  dead: 'kernel dead',
  error: 'error'
};

export class CompactPanel extends Widget {
  constructor(
    model: PanelModel,
    openWide?: (model: NotebookModel) => void,
    openTable?: (model: NotebookModel, name: string) => void
  ) {
    super();
    this._openWide = openWide ?? null;
    this._ns = new NamespaceSection(false, openTable && (name => openTable(this._model.current, name)));
    this._model = model;
    this.id = PANEL_ID;
    this.addClass('jp-IpythonCompact-panel');
    this.title.icon = compactIcon;
    this.title.caption = 'Context compaction';

    const header = el('div', 'jp-IpythonCompact-header');
    const titleRow = el('div', 'jp-IpythonCompact-titleRow');
    titleRow.append(el('h2', 'jp-IpythonCompact-title', 'Context compaction'), this._stateChip);
    header.append(titleRow, this._notebook, this._stateDetail);

    const gauge = section('Context', 'gauge');
    gauge.body.append(this._gauge);

    const actions = section('Actions', 'actions');
    this._focus.type = 'text';
    this._focus.placeholder = 'Focus for the summary';
    this._focus.setAttribute('aria-label', 'Focus text for compaction');
    this._focus.addEventListener('input', () => {
      this._model.current.view.focusText = this._focus.value;
    });
    const row = el('div', 'jp-IpythonCompact-buttons');
    this._buttons = [
      button('Compact', 'compact', () => void this._model.current.actions.compact(this._focus.value.trim())),
      button('Preview', 'preview', () => void this._model.current.actions.previewPlan(this._focus.value.trim())),
      button('Snapshot', 'snapshot', () => void this._model.current.actions.snapshot()),
      button('Restore', 'restore', () => void this._model.current.actions.restore())
    ];
    row.append(...this._buttons);
    actions.body.append(this._focus, row, this._result);

    const ns = section('Namespace', 'namespace');
    const refresh = button('↻', 'refresh-names', () => void this._model.current.refreshNames());
    refresh.title = 'Refresh the namespace now';
    refresh.classList.add('jp-IpythonCompact-iconButton');
    const wide = button('⤢', 'open-wide', () => this._openWide?.(this._model.current));
    wide.title = 'Open the namespace in the main area (wide, sortable, filterable)';
    wide.classList.add('jp-IpythonCompact-iconButton');
    const tools = el('span', 'jp-IpythonCompact-headTools');
    tools.append(this._ns.updated, refresh, wide);
    ns.head.append(tools);
    ns.body.append(this._ns.node);

    const timeline = section('Compaction timeline', 'timeline');
    const recallForm = el('form', 'jp-IpythonCompact-recallForm');
    this._recallInput.type = 'search';
    this._recallInput.placeholder = 'id or words';
    this._recallInput.setAttribute('aria-label', 'Recall original log text by entry id or search words');
    this._recallInput.addEventListener('input', () => {
      this._model.current.view.recallText = this._recallInput.value;
    });
    this._recallButton.type = 'submit';
    this._recallButton.dataset.action = 'recall';
    recallForm.append(this._recallInput, this._recallButton);
    recallForm.addEventListener('submit', event => {
      event.preventDefault();
      void this._model.current.actions.recall(this._recallInput.value);
    });
    timeline.body.append(recallForm, this._recall, this._calls, this._timeline);

    this.node.append(header, this._banner, gauge.root, actions.root, ns.root, timeline.root);
    model.changed.connect(this._render, this);
    this._render();
  }

  dispose(): void {
    this._model.changed.disconnect(this._render, this);
    super.dispose();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._model.setActive(true);
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this._model.setActive(false);
  }

  /** Run a recall for a pointer clicked in a summary, and bring the hits into view. */
  private _recallEntry(entryId: string): void {
    const m = this._model.current;
    this._recallInput.value = entryId;
    void m.actions.recall(entryId, true).then(() => {
      this._recall.scrollIntoView({ block: 'nearest' });
    });
  }

  private _render(): void {
    const m = this._model.current;
    if (m !== this._shown) {
      // Another notebook: show what the user had typed there.
      this._shown = m;
      this._focus.value = m.view.focusText;
      this._recallInput.value = m.view.recallText;
    }
    this.node.dataset.state = m.state;
    this.node.dataset.notebook = m.notebookLabel;
    this.node.dataset.busy = String(m.mainBusy);
    this.node.dataset.flooding = String(m.flooding);
    this._stateChip.dataset.state = m.state;
    this._stateChip.textContent = STATE_LABELS[m.state] ?? m.state;
    this._notebook.textContent = m.notebookLabel || 'Open a notebook to see its kernel.';
    this._notebook.title = m.notebookLabel;
    this._stateDetail.textContent = m.stateDetail;
    this._renderBanner();
    this._renderGauge();
    this._renderActions();
    this._renderNamespace();
    this._renderRecall();
    this._renderTimeline();
  }

  private _renderBanner(): void {
    const m = this._model.current;
    // Rebuilt only when what it says changes. Why: the model re-renders the panel on every state
    // report (a not-loaded kernel is asked again after each cell), and a button replaced between
    // the press and the release loses the click; a browser test clicking "Load extension" on a
    // loaded machine saw the button detached for 120 s (CI, stop 39).
    let wanted: { kind: string; text: string; make: () => HTMLButtonElement[] } | null = null;
    const show = (kind: string, text: string, make: () => HTMLButtonElement[]): void => {
      wanted = { kind, text, make };
    };
    if (m.actions.restoreKept.length && m.actions.pending === '') {
      const names = m.actions.restoreKept.join(', ');
      show(
        'restore-kept',
        `Not overwritten: ${names}. You defined ${m.actions.restoreKept.length === 1 ? 'it' : 'them'} since, ` +
          "with a value other than the snapshot's. Replace with the snapshot's values?",
        () => [
          button(`Overwrite ${names}`, 'restore-overwrite', () => void m.actions.overwriteKept()),
          button('Keep mine', 'restore-keep', () => m.actions.keepMine())
        ]
      );
    } else if (m.actions.restartNoticed && m.state !== 'restarting') {
      show(
        'restart',
        'The kernel was restarted. Its variables are gone; restore them from the last snapshot?',
        () => [
          button('Restore variables', 'restore-after-restart', () => void m.actions.restore()),
          button('Dismiss', 'dismiss-restart', () => m.actions.dismissRestart())
        ]
      );
    } else if (m.state === 'not-loaded') {
      show('not-loaded', 'The ipython_compact extension is not loaded in this kernel.', () => [
        button('Load extension', 'load-extension', () => void m.loadExtension())
      ]);
    } else if (m.state === 'error' || m.state === 'dead') {
      show('error', m.stateDetail, () => [button('Retry', 'retry', () => void m.connect())]);
    }
    const shown = wanted as { kind: string; text: string; make: () => HTMLButtonElement[] } | null;
    const key = [m, shown?.kind, shown?.text];
    if (key.every((v, i) => v === this._bannerShown[i])) {
      return; // the same words for the same notebook: keep the buttons the user may be pressing
    }
    this._bannerShown = key;
    this._banner.textContent = '';
    if (shown === null) {
      this._banner.hidden = true;
      delete this._banner.dataset.kind;
      return;
    }
    this._banner.hidden = false;
    this._banner.dataset.kind = shown.kind;
    this._banner.append(el('p', '', shown.text), ...shown.make());
  }

  private _renderGauge(): void {
    const m = this._model.current;
    const s = m.reads.status;
    const g = this._gauge;
    g.textContent = '';
    if (m.flooding) {
      g.appendChild(el('div', 'jp-IpythonCompact-flooding', FLOOD_NOTE));
    }
    if (m.reads.statusError) {
      g.appendChild(el('div', 'jp-IpythonCompact-problem', m.reads.statusError));
    }
    if (s !== null && m.noConversation) {
      // A plain notebook: nothing talks to a model, so an empty gauge would only puzzle.
      g.appendChild(el('p', 'jp-IpythonCompact-noConversation', NO_CONVERSATION_NOTE));
      if (s.session) {
        g.appendChild(sessionLine(s.session));
      }
      return;
    }
    if (m.reads.fromLog && s !== null) {
      g.appendChild(
        el(
          'div',
          'jp-IpythonCompact-fromLog',
          'From the session log: this kernel has not loaded the extension yet (the live names need it).'
        )
      );
    }
    if (s !== null && (s.window === null || s.window <= 0) && m.reads.fromLog) {
      g.appendChild(el('div', 'jp-IpythonCompact-tokenCount', `${formatTokens(s.tokens)} tokens in context`));
      if (s.session) {
        g.appendChild(sessionLine(s.session));
      }
      return;
    }
    if (s === null || s.window === null || s.window <= 0) {
      g.appendChild(el('div', 'jp-IpythonCompact-empty', 'No context figures yet.'));
      return;
    }
    const pct = (n: number | null): string => `${Math.max(0, Math.min(100, ((n ?? 0) / (s.window ?? 1)) * 100))}%`;
    const bar = el('div', 'jp-IpythonCompact-bar');
    bar.setAttribute('role', 'meter');
    bar.setAttribute('aria-valuemin', '0');
    bar.setAttribute('aria-valuemax', String(s.window));
    bar.setAttribute('aria-valuenow', String(s.tokens ?? 0));
    const fill = el('div', 'jp-IpythonCompact-fill');
    fill.style.width = pct(s.tokens);
    const level =
      s.tokens !== null && s.blocking_line !== null && s.tokens >= s.blocking_line
        ? 'blocking'
        : s.tokens !== null && s.background_line !== null && s.tokens >= s.background_line
          ? 'background'
          : 'ok';
    // Which side of the kernel's lines the count is on: a comparison for colour, not a decision.
    fill.dataset.level = level;
    bar.appendChild(fill);
    for (const [name, value] of [
      ['background', s.background_line],
      ['blocking', s.blocking_line]
    ] as const) {
      if (value !== null) {
        const mark = el('div', `jp-IpythonCompact-line jp-IpythonCompact-line-${name}`);
        mark.style.left = pct(value);
        mark.title = `${name} line: ${formatTokens(value)} tokens`;
        bar.appendChild(mark);
      }
    }
    const figures = el('div', 'jp-IpythonCompact-figures');
    const count = el('div', 'jp-IpythonCompact-tokenCount', `${formatTokens(s.tokens)} / ${formatTokens(s.window)} tokens`);
    if (s.estimate) {
      count.title = `estimated by ${s.estimate}`;
    }
    figures.appendChild(count);
    const legend = el('div', 'jp-IpythonCompact-legend');
    if (s.background_line !== null) {
      legend.appendChild(el('span', 'jp-IpythonCompact-key-background', `background ${formatTokens(s.background_line)}`));
    }
    if (s.blocking_line !== null) {
      legend.appendChild(el('span', 'jp-IpythonCompact-key-blocking', `blocking ${formatTokens(s.blocking_line)}`));
    }
    figures.appendChild(legend);
    const facts: string[] = [];
    if (s.session) {
      figures.appendChild(sessionLine(s.session));
    }
    if (s.entries !== null) {
      facts.push(plural(s.entries, 'entry', 'entries'));
    }
    if (s.compactions !== null) {
      facts.push(plural(s.compactions, 'compaction', 'compactions'));
    }
    const inFlight = Array.isArray(s.in_flight) ? s.in_flight.length : s.in_flight ? 1 : 0;
    if (inFlight > 0) {
      facts.push(inFlight === 1 ? 'a compaction is running' : `${inFlight} compactions running`);
    }
    figures.appendChild(el('div', 'jp-IpythonCompact-facts', facts.join(' · ')));
    if (s.last_failure) {
      const failure = isObject(s.last_failure) ? String(s.last_failure['message'] ?? '') : String(s.last_failure);
      figures.appendChild(el('div', 'jp-IpythonCompact-problem', `last failure: ${failure}`));
    }
    g.append(bar, figures);
  }

  private _renderActions(): void {
    const m = this._model.current;
    // Without a subshell a request would only queue behind the running cell.
    const usable = m.state === 'ready' && m.actions.pending === '' && !(m.mainBusy && !m.liveWhileBusy);
    for (const b of this._buttons) {
      // Restore stays usable when the extension is not loaded: it loads it first.
      b.disabled = !(usable || (b.dataset.action === 'restore' && m.state === 'not-loaded'));
      // Nothing to compact in a session without a model conversation: say why instead of failing.
      const pointless = (b.dataset.action === 'compact' || b.dataset.action === 'preview') && m.noConversation;
      if (pointless) {
        b.disabled = true;
      }
      b.title = pointless ? NO_CONVERSATION_NOTE : '';
    }
    // Rebuilt only when what it shows changes (another notebook, action, answer or plan): a re-render
    // on every report replaced the dismiss button and the plan under the user's pointer (a browser
    // test's note was detached between finding and scrolling to it).
    const shown = [m, m.actions.pending, m.actions.lastAction, m.actions.preview];
    if (shown.every((v, i) => v === this._resultShown[i])) {
      return;
    }
    this._resultShown = shown;
    this._result.textContent = '';
    if (m.actions.pending) {
      this._result.dataset.kind = 'pending';
      this._result.appendChild(el('p', '', `${m.actions.pending}…`));
      return;
    }
    if (m.actions.lastAction === null) {
      delete this._result.dataset.kind;
      return;
    }
    // "Not compacted: nothing to compact" is the kernel's answer, not a failure: neutral, not red.
    this._result.dataset.kind = m.actions.lastAction.ok ? 'ok' : m.actions.lastAction.declined ? 'note' : 'error';
    this._result.dataset.action = m.actions.lastAction.action;
    const close = button('×', 'dismiss-result', () => m.actions.dismiss());
    close.title = 'Dismiss this message (it also clears when a cell runs)';
    close.classList.add('jp-IpythonCompact-dismiss');
    this._result.append(close, el('p', '', m.actions.lastAction.text));
    if (m.actions.preview !== null && m.actions.lastAction.action === 'preview') {
      this._result.appendChild(renderPlan(m.actions.preview));
    }
  }

  private _renderNamespace(): void {
    const m = this._model.current;
    this._ns.render(m, m.view.names);
  }

  private _renderTimeline(): void {
    const m = this._model.current;
    renderCallTree(this._calls, m.reads.calls);
    this._timeline.textContent = '';
    if (m.reads.compactions.length === 0) {
      this._timeline.appendChild(el('div', 'jp-IpythonCompact-empty', 'No compactions yet.'));
      return;
    }
    const onRecall = (entryId: string): void => this._recallEntry(entryId);
    m.reads.compactions.forEach((c, i) => {
      this._timeline.appendChild(renderCompactionCard(c, i === m.reads.compactions.length - 1, onRecall));
    });
  }

  private _renderRecall(): void {
    const m = this._model.current;
    const box = this._recall;
    box.textContent = '';
    // Same rule as the actions: only when connected, and not queued behind a cell without a subshell.
    this._recallButton.disabled = m.actions.recallPending || m.state !== 'ready' || (m.mainBusy && !m.liveWhileBusy);
    box.hidden = !m.actions.recallPending && m.actions.recallError === '' && m.actions.recallAsked === '';
    if (m.actions.recallPending) {
      box.dataset.kind = 'pending';
      box.appendChild(el('p', 'jp-IpythonCompact-recallNote', 'recall…'));
      return;
    }
    if (m.actions.recallError) {
      box.dataset.kind = 'error';
      box.appendChild(el('p', 'jp-IpythonCompact-recallNote', m.actions.recallError));
      return;
    }
    if (m.actions.recallAsked === '') {
      delete box.dataset.kind;
      return;
    }
    box.dataset.kind = 'ok';
    const count = m.actions.recallHits.length;
    const head = el('div', 'jp-IpythonCompact-recallHead');
    head.append(
      el('span', 'jp-IpythonCompact-recallNote', `${count} ${count === 1 ? 'hit' : 'hits'} for ${m.actions.recallAsked}`),
      button('×', 'clear-recall', () => m.actions.clearRecall())
    );
    box.appendChild(head);
    for (const hit of m.actions.recallHits) {
      box.appendChild(renderHit(hit));
    }
  }

  private _model: PanelModel;
  private _stateChip = el('span', 'jp-IpythonCompact-state');
  private _notebook = el('div', 'jp-IpythonCompact-notebook');
  private _stateDetail = el('div', 'jp-IpythonCompact-stateDetail');
  private _banner = el('div', 'jp-IpythonCompact-banner');
  private _bannerShown: unknown[] = [];
  private _gauge = el('div', 'jp-IpythonCompact-gaugeBody');
  private _focus = el('input', 'jp-IpythonCompact-focus jp-mod-styled');
  private _buttons: HTMLButtonElement[] = [];
  private _result = el('div', 'jp-IpythonCompact-result');
  private _resultShown: unknown[] = [];
  private _ns: NamespaceSection;
  private _calls = el('div', 'jp-IpythonCompact-calls');
  private _openWide: ((model: NotebookModel) => void) | null = null;
  private _timeline = el('div', 'jp-IpythonCompact-timelineBody');
  private _recallInput = el('input', 'jp-IpythonCompact-recallInput jp-mod-styled');
  private _recallButton = el('button', 'jp-IpythonCompact-button jp-mod-styled', 'Recall');
  private _recall = el('div', 'jp-IpythonCompact-recall');
  private _shown: NotebookModel | null = null;
}

/** One recall hit: id, role or kind, time, and the text (an excerpt, the rest on request). */
function renderHit(hit: IRecallHit): HTMLElement {
  const node = el('div', 'jp-IpythonCompact-hit');
  node.dataset.entryId = hit.id;
  const head = el('div', 'jp-IpythonCompact-hitHead');
  head.append(
    el('code', 'jp-IpythonCompact-hitId', hit.id),
    // `toolResult` reads as "tool result"; the kernel's value is in the tooltip.
    Object.assign(el('span', 'jp-IpythonCompact-hitRole', (hit.role ?? hit.kind).replace(/([a-z])([A-Z])/g, '$1 $2')), {
      title: hit.role ?? hit.kind
    })
  );
  const when = formatTimestamp(hit.timestamp);
  if (when) {
    head.appendChild(el('span', 'jp-IpythonCompact-when', when));
  }
  node.appendChild(head);
  const text = hit.text;
  const excerpt = el(
    'div',
    'jp-IpythonCompact-hitText',
    text.length > RECALL_EXCERPT_CHARS ? `${text.slice(0, RECALL_EXCERPT_CHARS).trimEnd()}…` : text || '(no text)'
  );
  node.appendChild(excerpt);
  if (text.length > RECALL_EXCERPT_CHARS) {
    const more = el('button', 'jp-IpythonCompact-linkButton', `Show all (${text.length.toLocaleString('en-US')} chars)`);
    more.type = 'button';
    more.dataset.action = 'recall-more';
    more.addEventListener('click', () => {
      excerpt.textContent = text;
      more.remove();
    });
    node.appendChild(more);
  }
  return node;
}

/** The preview reply's four buckets as a small table of what each holds. */
function renderPlan(plan: Json): HTMLElement {
  const table = el('table', 'jp-IpythonCompact-plan');
  const before = plan['tokens_before'];
  if (typeof before === 'number') {
    const row = table.insertRow();
    row.dataset.bucket = 'now';
    row.insertCell().textContent = 'in context now';
    row.insertCell().textContent = `${formatTokens(before)} tokens`;
  }
  for (const key of ['summarize', 'turn_prefix', 'encode', 'keep', 'externalize', 'discard']) {
    const value = plan[key];
    if (value === undefined) {
      continue;
    }
    const row = table.insertRow();
    row.dataset.bucket = key;
    row.insertCell().textContent = key.replace('_', ' ');
    row.insertCell().textContent = describeBucket(value);
  }
  return table;
}

function describeBucket(value: unknown): string {
  if (typeof value === 'number') {
    return `${formatTokens(value)} tokens`;
  }
  if (Array.isArray(value)) {
    return `${value.length} ${value.length === 1 ? 'item' : 'items'}`;
  }
  if (isObject(value)) {
    const parts: string[] = [];
    const tokens = value['tokens'];
    if (typeof tokens === 'number') {
      parts.push(`${formatTokens(tokens)} tokens`);
    }
    for (const k of ['entries', 'count', 'items']) {
      const v = value[k];
      const one = k === 'entries' ? 'entry' : 'item';
      const many = k === 'entries' ? 'entries' : 'items';
      if (typeof v === 'number') {
        parts.push(plural(v, one, many));
      } else if (Array.isArray(v)) {
        parts.push(plural(v.length, one, many));
      }
    }
    return parts.join(' · ') || '—';
  }
  return String(value);
}

/**
 * The call tree under the session (issue 22.7): the root and the sub-agent
 * sessions it started, indented by depth, each with the name its parent gave it
 * and its entry count. Hidden while the session started no sub-agent.
 */
export function renderCallTree(box: HTMLElement, calls: ICallNode[]): void {
  box.textContent = '';
  box.hidden = calls.length < 2;
  if (box.hidden) {
    return;
  }
  box.appendChild(el('div', 'jp-IpythonCompact-callsHead', `Call tree · ${plural(calls.length - 1, 'sub-agent', 'sub-agents')}`));
  const list = el('ul', 'jp-IpythonCompact-callList');
  for (const node of calls) {
    const item = el('li', 'jp-IpythonCompact-call');
    item.dataset.session = node.session;
    item.dataset.depth = String(node.depth);
    item.style.paddingLeft = `${Math.min(node.depth, 8) * 14}px`;
    const label = node.depth === 0 ? 'this session' : node.name ?? tail(node.session);
    const name = el('span', 'jp-IpythonCompact-callName', `${node.depth === 0 ? '' : '└ '}${label}`);
    name.title = node.session;
    item.append(name, el('span', 'jp-IpythonCompact-callFacts', plural(node.entries, 'entry', 'entries')));
    list.appendChild(item);
  }
  box.appendChild(list);
}
