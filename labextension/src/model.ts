/**
 * The panel's models.
 *
 * `NotebookModel` belongs to one notebook's session context for as long as
 * that notebook is open: it keeps one channel to its kernel, the last answers
 * the kernel gave, and what the user has pending there (a noticed restart, the
 * last action's result, the recall search). `PanelModel` keeps one
 * `NotebookModel` per open notebook and says which one the panel shows, so
 * switching notebooks and back finds each one as it was left; a restart in a
 * notebook the panel is not showing is still noticed.
 *
 * Nothing here computes a figure of its own: tokens, thresholds, names and
 * summaries are what the kernel replied. The models only decide *when* to ask
 * (after each cell, every few seconds while a cell runs on a kernel with
 * subshells, after a restart) and remember what state the connection is in,
 * so the view can say "not loaded", "busy" or "restarted" plainly.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { Kernel, KernelMessage, ServerConnection } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { CompactChannel, RequestError, REQUEST_TIMEOUT_MS } from './channel';
import { INamesSort } from './names';
import { formatTokens, plural } from './summary';
import {
  ICompaction,
  INameInfo,
  IStatus,
  isObject,
  Json,
  numberField,
  Op,
  IRecallHit,
  parseCompaction,
  parseNames,
  parseRecallHits,
  parseStatus
} from './protocol';

/** Where the connection to the kernel side stands. */
export type ConnectionState =
  | 'no-notebook'
  | 'no-kernel'
  | 'connecting'
  | 'not-loaded'
  | 'loading'
  | 'ready'
  | 'restarting'
  | 'dead'
  | 'error';

/** The outcome of the last user action, shown under the action buttons. */
export interface IActionResult {
  action: string;
  ok: boolean;
  text: string;
  reply: Json | null;
}

/**
 * How long an action waits for its reply (ms): a preview, snapshot or restore
 * does more than a probe; a compaction may call a model.
 */
export const ACTION_TIMEOUT_MS = 30000;
export const COMPACT_TIMEOUT_MS = 120000;

/** How often the namespace is re-read while a cell runs (ms). */
export const BUSY_POLL_MS = 2000;

/** The longest the poll waits between asks while replies are being lost to an output flood (ms). */
export const MAX_POLL_MS = 16000;

/** What the panel says instead of an error while replies are lost to an output flood. */
export const FLOOD_NOTE = 'kernel output is flooding; the panel will refresh when it calms down';

/** Why Compact and Preview are disabled in a session with no model conversation. */
export const NO_CONVERSATION_NOTE =
  'No model conversation in this session yet. The gauge fills when an %%agent cell runs ' +
  'or a transcript is imported with %compact import FILE.';

/** Rows of the namespace table drawn at a time ("show more" adds as many again). */
export const NAMES_PAGE = 200;

/**
 * At most one run of a task at a time. Asking while one runs queues a single
 * follow-up run (later asks share it), so nothing piles up when replies are slow
 * and an ask made after a change is still answered by a fresh run.
 */
export class SingleFlight {
  constructor(task: () => Promise<void>) {
    this._task = task;
  }

  /** Whether a run is in flight now. */
  get busy(): boolean {
    return this._current !== null;
  }

  run(): Promise<void> {
    if (this._current === null) {
      const current = this._task().finally(() => {
        if (this._current === current) {
          this._current = null;
        }
      });
      this._current = current;
      return current;
    }
    if (this._next === null) {
      const again = (): Promise<void> => {
        this._next = null;
        return this.run();
      };
      this._next = this._current.then(again, again);
    }
    return this._next;
  }

  private _task: () => Promise<void>;
  private _current: Promise<void> | null = null;
  private _next: Promise<void> | null = null;
}

/** The magic the "load" button runs; a normal, user-initiated execute request. */
export const LOAD_CODE = '%load_ext ipython_compact';

/**
 * Statuses the kernel connection may be left in when no tracked status has
 * reached it since it (re)connected.
 */
const STALE_STATUSES = new Set<string>(['starting', 'unknown', 'restarting', 'autorestarting']);

/**
 * Give a kernel whose status is stale one tracked request, so it reads "Idle"
 * (or "Busy") again.
 *
 * Why: the server extension leaves comm and subshell requests out of status
 * tracking (docs/kernel-status.md), and JupyterLab already leaves out
 * `kernel_info_request` and `debug_request`. After a restart or on a fresh
 * kernel, the only statuses a connection then sees can all be untracked ones,
 * and it stays "Starting" (or "Unknown") until the user runs a cell. An empty
 * `is_complete_request` runs on the main shell: its busy/idle pair is the main
 * shell's truth (queued behind a running cell, it reports after that cell).
 * Called once the kernel answered the comm (or said it has no such target),
 * so it is known to be up.
 */
function settleStaleStatus(kernel: Kernel.IKernelConnection): void {
  if (!STALE_STATUSES.has(kernel.status)) {
    return;
  }
  kernel.requestIsComplete({ code: '' }).catch(() => {
    // the status stays as it was; nothing the user asked for failed
  });
}

/** One open notebook's connection, answers and pending user state. */
export class NotebookModel {
  constructor(context: ISessionContext | null, label: string) {
    this._context = context;
    this.notebookLabel = label;
    if (context === null) {
      return;
    }
    context.kernelChanged.connect(this._onKernelChanged, this);
    context.statusChanged.connect(this._onStatusChanged, this);
    context.iopubMessage.connect(this._onIopub, this);
    this.state = 'connecting';
    this.stateDetail = 'waiting for the kernel';
    void context.ready.then(() => {
      if (!this._disposed) {
        this._autoConnect();
      }
    });
  }

  /** Fires whenever anything the view shows has changed. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  state: ConnectionState = 'no-notebook';
  stateDetail = '';
  /** Label of the followed notebook (its path), or '' when none. */
  notebookLabel = '';
  hello: Json | null = null;
  status: IStatus | null = null;
  /**
   * `status` and `compactions` come from the session log (the server extension),
   * not from the kernel: it has not loaded the extension (e.g. after a restart).
   */
  fromLog = false;
  /** Why the last `status` request failed ('' when it did not). */
  statusError = '';
  names: INameInfo[] = [];
  /** All user names the kernel counted (even ones a time budget cut from `names`), or null. */
  namesTotal: number | null = null;
  /** Bumped only when the kernel's list differs from the one before (the table is rebuilt then). */
  namesVersion = 0;
  /** What the namespace filter box holds for this notebook. */
  namesFilter = '';
  /** How this notebook's namespace table is sorted (the user clicks a column header). */
  namesSort: INamesSort = { key: 'name', descending: false };
  /** How many matching rows the table draws. */
  namesShown = NAMES_PAGE;
  /** Replies are being lost while the kernel floods its output; the poll has backed off. */
  flooding = false;
  namesTruncated = false;
  namesElapsedMs: number | null = null;
  /** When the namespace was last answered (browser clock), or null. */
  namesAt: Date | null = null;
  namesError = '';
  /** True while the main shell runs a user cell. */
  mainBusy = false;
  compactions: ICompaction[] = [];
  lastAction: IActionResult | null = null;
  /** The last `preview` reply, shown until the next action. */
  preview: Json | null = null;
  /** A restart was seen since the panel last connected; restore is offered. */
  restartNoticed = false;
  /**
   * Names the last restore did not overwrite because the user defined them
   * since with another value; the panel asks whether to take the snapshot's.
   */
  restoreKept: string[] = [];
  /** An action is in flight (buttons are disabled). */
  pendingAction = '';
  /** What the user typed as focus text for this notebook (kept across notebook switches). */
  focusText = '';
  /** What the recall box holds for this notebook. */
  recallText = '';
  /** The last recall: what was asked, the hits, or why it failed. */
  recallAsked = '';
  recallHits: IRecallHit[] = [];
  recallError = '';
  recallPending = false;

  /** The session has no model conversation: there is nothing to compact or preview. */
  get noConversation(): boolean {
    const s = this.status;
    if (s === null) {
      return false;
    }
    return s.conversation === false || (s.conversation === null && s.entries === 0);
  }

  /** The current wait between polls (ms): BUSY_POLL_MS, doubled per round while flooding. */
  get pollDelayMs(): number {
    return this._pollDelay;
  }

  /** Whether requests are answered while a cell runs (comm on a subshell). */
  get liveWhileBusy(): boolean {
    return this._channel !== null && this._channel.overSubshell;
  }

  /** The session context this model belongs to (null for the "no notebook" model). */
  get context(): ISessionContext | null {
    return this._context;
  }

  /**
   * The panel is shown (true) or hidden (false). Nothing is sent to a kernel
   * until the panel has been shown: a notebook whose user never opens the
   * panel gets no comm and no subshell. Restarts are still noticed meanwhile.
   */
  setActive(active: boolean): void {
    this._active = active;
    if (!active) {
      this._stopPolling();
      return;
    }
    const context = this._context;
    if (context === null) {
      return;
    }
    void context.ready.then(() => {
      if (this._context !== context || !this._active) {
        return;
      }
      if (this._channel === null) {
        void this.connect();
      } else {
        void this.refresh();
        if (this.mainBusy) {
          this._startPolling();
        }
      }
    });
  }

  /**
   * (Re)open the channel to the current kernel. Concurrent calls share one
   * attempt; a newer kernel makes an older attempt's result be ignored.
   */
  connect(): Promise<void> {
    const kernel = this._kernel();
    if (this._connecting !== null) {
      // An attempt for another kernel (the user switched notebooks) is
      // discarded when it ends; connect to this one after it.
      return this._connectingFor === kernel ? this._connecting : this._connecting.then(() => this.connect());
    }
    this._connectingFor = kernel;
    this._connecting = this._connect().finally(() => {
      this._connecting = null;
      this._connectingFor = null;
    });
    return this._connecting;
  }

  /** Re-read status, names and the timeline. */
  async refresh(): Promise<void> {
    if (this._channel === null) {
      return;
    }
    await Promise.all([this.refreshNames(), this._refreshStatus(), this._refreshSummaries()]);
  }

  /** Re-read the namespace (shows a busy note instead when it cannot be answered now). */
  refreshNames(): Promise<void> {
    const channel = this._channel;
    if (channel === null) {
      return Promise.resolve();
    }
    if (this.mainBusy && !channel.overSubshell) {
      this.namesError = 'Kernel busy: this kernel has no subshells, so the namespace refreshes when the cell finishes.';
      this._changed.emit();
      return Promise.resolve();
    }
    return this._namesFlight.run();
  }

  private async _refreshNames(): Promise<void> {
    const channel = this._channel;
    if (channel === null || (this.mainBusy && !channel.overSubshell)) {
      return;
    }
    const sentBusy = this.mainBusy || this.flooding;
    try {
      const reply = await channel.request('names', {});
      if (channel !== this._channel) {
        return;
      }
      this._answered();
      // Rebuild the table only when the list changed; a poll that finds the same names keeps it.
      const key = JSON.stringify(reply['names'] ?? null);
      if (key !== this._namesKey) {
        this._namesKey = key;
        this.names = parseNames(reply);
        this.namesVersion += 1;
      }
      this.namesTotal = numberField(reply, 'total');
      this.namesTruncated = reply['truncated'] === true;
      this.namesElapsedMs = numberField(reply, 'elapsed_ms');
      this.namesAt = new Date();
      this.namesError = '';
    } catch (err) {
      if (channel === this._channel) {
        this.namesError = this._failure(err, 'names', sentBusy);
      }
    } finally {
      this._changed.emit();
    }
  }

  /** Run `%load_ext ipython_compact` in the kernel, then connect. */
  async loadExtension(): Promise<void> {
    const kernel = this._kernel();
    if (kernel === null) {
      return;
    }
    this._setState('loading', `running ${LOAD_CODE}`);
    try {
      const reply = await kernel.requestExecute({
        code: LOAD_CODE,
        silent: true,
        store_history: false,
        allow_stdin: false,
        stop_on_error: false
      }).done;
      const content = reply.content;
      if (content.status === 'error') {
        this._setState('not-loaded', `${LOAD_CODE} failed: ${content.ename}: ${content.evalue}`);
        return;
      }
    } catch (err) {
      this._setState('not-loaded', `${LOAD_CODE} failed: ${String(err)}`);
      return;
    }
    await this.connect();
  }

  /** Ask the kernel to compact now, with optional focus text. */
  compact(focus: string): Promise<void> {
    return this._act('compact', focus ? { focus } : {}, reply => {
      const c = parseCompaction(reply['compaction']);
      if (c === null) {
        return 'Compaction finished.';
      }
      return `Compacted (${c.reason}): ${formatTokens(c.tokens_before ?? null)} → ${formatTokens(c.tokens_after ?? null)} tokens.`;
    });
  }

  /** Ask for the dry-run plan; the view shows `preview`. */
  previewPlan(focus: string): Promise<void> {
    return this._act('preview', focus ? { focus } : {}, reply => {
      this.preview = reply;
      return 'Preview of the next compaction (nothing changed):';
    });
  }

  /** Save a snapshot of the namespace. */
  snapshot(): Promise<void> {
    return this._act('snapshot', {}, reply => {
      const snap = reply['snapshot'];
      if (!isObject(snap)) {
        return 'Snapshot saved.';
      }
      const saved = countOf(snap['saved']);
      const skipped = Array.isArray(snap['skipped']) ? snap['skipped'] : [];
      const gen = numberField(snap, 'generation');
      return (
        `Snapshot${gen === null ? '' : ` generation ${gen}`}: saved ${plural(saved, 'name', 'names')}` +
        (skipped.length ? `; skipped ${namesWithReasons(skipped)}` : '') +
        '.'
      );
    });
  }

  /** Restore names from the newest snapshot, loading the extension first if needed. */
  async restore(): Promise<void> {
    // Right after a restart the panel may still be finding out whether the
    // extension is loaded in the new kernel; settle that first.
    if (this._connecting !== null) {
      await this._connecting;
    }
    if (this.state === 'not-loaded') {
      await this.loadExtension();
    } else if (this._channel === null) {
      await this.connect();
    }
    await this._act('restore', {}, reply => this._describeRestore(reply));
  }

  /** Take the snapshot's values for the names the last restore kept (the user said yes). */
  async overwriteKept(): Promise<void> {
    const names = this.restoreKept;
    if (names.length === 0) {
      return;
    }
    await this._act('restore', { names }, reply => this._describeRestore(reply));
  }

  /** Dismiss the last action's message. */
  dismissAction(): void {
    this.lastAction = null;
    this.preview = null;
    this._changed.emit();
  }

  /** Leave the kept names as they are (the user said no). */
  keepMine(): void {
    this.restoreKept = [];
    this._changed.emit();
  }

  private _describeRestore(reply: Json): string {
    this.restartNoticed = false;
    const restored = Array.isArray(reply['restored']) ? reply['restored'].map(String) : [];
    const failed = Array.isArray(reply['failed']) ? reply['failed'] : [];
    const quarantined = Array.isArray(reply['quarantined']) ? reply['quarantined'] : [];
    this.restoreKept = Array.isArray(reply['kept']) ? reply['kept'].map(String) : [];
    let text = `Restored ${plural(restored.length, 'name', 'names')}`;
    text += restored.length ? `: ${restored.join(', ')}.` : '.';
    if (this.restoreKept.length) {
      text += ` Not overwritten (you defined them since): ${this.restoreKept.join(', ')}.`;
    }
    if (failed.length) {
      text += ` Could not load: ${namesWithReasons(failed)}.`;
    }
    if (quarantined.length) {
      text += ` Not loaded: ${namesWithReasons(quarantined)}.`;
    }
    return text;
  }

  /**
   * Recall original log text. A single word is tried as an entry id first (an
   * externalized pointer reads `recall 1a2b3c4d`); when no entry has that id,
   * or the text has spaces, it is a full-text query. The kernel decides what
   * matches; the panel only shows the hits.
   */
  async recall(text: string, asEntryId = false): Promise<void> {
    const wanted = text.trim();
    this.recallText = wanted;
    if (wanted === '') {
      this.recallAsked = '';
      this.recallHits = [];
      this.recallError = 'Type an entry id or words to search for.';
      this._changed.emit();
      return;
    }
    if (this._channel === null) {
      await this.connect();
    }
    const channel = this._channel;
    if (channel === null) {
      this.recallError = 'Not connected: cannot recall.';
      this._changed.emit();
      return;
    }
    this.recallPending = true;
    this.recallError = '';
    this._changed.emit();
    try {
      let hits: IRecallHit[] | null = null;
      let asked = `query “${wanted}”`;
      if (asEntryId || /^[\w.:-]+$/.test(wanted)) {
        try {
          hits = parseRecallHits(await channel.request('recall', { entry_id: wanted, limit: 20 }));
          asked = `entry ${wanted}`;
        } catch (err) {
          if (asEntryId || !(err instanceof RequestError) || err.code !== 'failed') {
            throw err;
          }
          hits = null; // no entry with that id: search for the text instead
        }
        if (hits !== null && hits.length === 0 && !asEntryId) {
          hits = null;
        }
      }
      if (hits === null) {
        hits = parseRecallHits(await channel.request('recall', { query: wanted, limit: 20 }));
        asked = `query “${wanted}”`;
      }
      this.recallAsked = asked;
      this.recallHits = hits;
    } catch (err) {
      this.recallAsked = wanted;
      this.recallHits = [];
      this.recallError = describeError(err, 'recall');
    } finally {
      this.recallPending = false;
      this._changed.emit();
    }
  }

  /** Hide the restart banner without restoring. */
  dismissRestart(): void {
    this.restartNoticed = false;
    this._changed.emit();
  }

  /** Close the comm (the kernel then releases its subshell) and stop asking, e.g. when the page unloads. */
  release(): void {
    this._active = false;
    this._stopPolling();
    const channel = this._channel;
    this._channel = null;
    this._channelKernel = null;
    channel?.abandon();
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    const context = this._context;
    if (context !== null) {
      context.kernelChanged.disconnect(this._onKernelChanged, this);
      context.statusChanged.disconnect(this._onStatusChanged, this);
      context.iopubMessage.disconnect(this._onIopub, this);
    }
    this._dropChannel();
    this._stopPolling();
    this._context = null;
    Signal.clearData(this);
  }

  private async _connect(): Promise<void> {
    const kernel = this._kernel();
    if (kernel === null) {
      this._dropChannel();
      this._setState('no-kernel', 'this notebook has no running kernel');
      return;
    }
    if (this._channel !== null && !this._channel.isClosed && this._channelKernel === kernel) {
      return;
    }
    this._dropChannel();
    this._setState('connecting', 'opening the ipython_compact comm');
    try {
      const { channel, hello } = await CompactChannel.connect(kernel, REQUEST_TIMEOUT_MS);
      if (this._kernel() !== kernel || this._disposed) {
        channel.dispose();
        return;
      }
      this._channel = channel;
      this._channelKernel = kernel;
      this.hello = hello;
      settleStaleStatus(kernel);
      channel.closed.connect(() => {
        if (this._channel === channel) {
          this._channel = null;
          this._stopPolling();
          if (this.state === 'ready') {
            this._setState('connecting', 'the comm was closed');
          }
        }
      });
      this._setState('ready', channel.overSubshell ? 'live while cells run (subshell)' : 'refreshes between cells');
      if (this.mainBusy) {
        this._startPolling();
      }
      await this.refresh();
    } catch (err) {
      if (this._kernel() !== kernel) {
        return;
      }
      if (err instanceof RequestError && err.code === 'not_loaded') {
        settleStaleStatus(kernel); // the kernel answered (it has no ipython_compact target): it is up
        this._setState('not-loaded', 'the ipython_compact extension is not loaded in this kernel');
      } else if (err instanceof RequestError && err.code === 'timeout' && this.mainBusy) {
        this._setState('error', 'kernel busy: will connect when the running cell finishes');
      } else {
        this._setState('error', describeError(err, 'connect'));
      }
    }
  }

  private async _act(
    action: Op,
    args: Json,
    describe: (reply: Json) => string
  ): Promise<void> {
    if (this._channel === null) {
      await this.connect();
    }
    const channel = this._channel;
    if (channel === null) {
      this.lastAction = { action, ok: false, text: `Not connected: cannot ${action}.`, reply: null };
      this._changed.emit();
      return;
    }
    this.pendingAction = action;
    this.preview = null;
    this._changed.emit();
    try {
      const timeout = action === 'compact' ? COMPACT_TIMEOUT_MS : ACTION_TIMEOUT_MS;
      const reply = await channel.request(action, args, timeout);
      this.lastAction = { action, ok: true, text: describe(reply), reply };
    } catch (err) {
      this.lastAction = { action, ok: false, text: describeError(err, action), reply: null };
    } finally {
      this.pendingAction = '';
      this._changed.emit();
    }
    await this.refresh();
  }

  private _refreshStatus(): Promise<void> {
    return this._statusFlight.run();
  }

  private _refreshSummaries(): Promise<void> {
    return this._summariesFlight.run();
  }

  private async _askStatus(): Promise<void> {
    const channel = this._channel;
    if (channel === null || (this.mainBusy && !channel.overSubshell)) {
      return;
    }
    const sentBusy = this.mainBusy || this.flooding;
    try {
      const reply = await channel.request('status');
      if (channel === this._channel) {
        this._answered();
        this.status = parseStatus(reply);
        this.fromLog = false;
        this.statusError = '';
      }
    } catch (err) {
      if (channel === this._channel) {
        this.statusError = this._failure(err, 'status', sentBusy);
      }
    }
    this._changed.emit();
  }

  private async _askSummaries(): Promise<void> {
    const channel = this._channel;
    if (channel === null || (this.mainBusy && !channel.overSubshell)) {
      return;
    }
    const sentBusy = this.mainBusy || this.flooding;
    try {
      const reply = await channel.request('summaries', { limit: 20 });
      const list = Array.isArray(reply['compactions']) ? reply['compactions'] : [];
      if (channel === this._channel) {
        this._answered();
        this.compactions = list
          .map(parseCompaction)
          .filter((c): c is ICompaction => c !== null);
      }
    } catch (err) {
      if (channel === this._channel) {
        this._failure(err, 'summaries', sentBusy);
      }
      console.warn('ipython-compact: summaries failed', err);
    }
    this._changed.emit();
  }

  /**
   * A request failed: the text to show for it. A timeout of a request sent
   * while the main shell ran a cell (or while already flooding; the cell may
   * have ended since) is the server's IOPub rate limiter dropping replies under
   * an output flood, not a fault: the poll backs off and the panel says so
   * instead of showing an error ('' is returned).
   */
  private _failure(err: unknown, what: string, sentBusy: boolean): string {
    const busy = sentBusy || this.mainBusy || this.flooding;
    if (err instanceof RequestError && err.code === 'timeout' && busy) {
      if (!this.flooding) {
        this.flooding = true;
        this._changed.emit();
      }
      if (this._poll === null) {
        this._schedulePoll();
      }
      return '';
    }
    return describeError(err, what);
  }

  /** A reply came back: leave the flood back-off. */
  private _answered(): void {
    if (!this.flooding && this._pollDelay === BUSY_POLL_MS) {
      return;
    }
    this.flooding = false;
    this._pollDelay = BUSY_POLL_MS;
    if (this.statusError === '' && this.namesError === '') {
      this._changed.emit();
    }
  }

  private _onKernelChanged(): void {
    this._dropChannel();
    this.mainBusy = false;
    this._clearAnswers();
    this._autoConnect();
  }

  /** Connect on the model's own initiative only while the panel is shown. */
  private _autoConnect(): void {
    if (this._active) {
      void this.connect();
    }
  }

  private _onStatusChanged(_: ISessionContext, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting') {
      this.restartNoticed = true;
      this.restoreKept = [];
      this.mainBusy = false;
      this._dropChannel();
      this._clearAnswers();
      this._setState('restarting', 'the kernel is restarting');
    } else if (status === 'dead') {
      this._dropChannel();
      this._setState('dead', 'the kernel is dead');
    } else if (status === 'idle' && (this.state === 'restarting' || this.state === 'dead')) {
      this._autoConnect();
    }
  }

  /**
   * Track user cells on the main shell from IOPub status messages (the session
   * status flickers when subshells report idle), refresh after each cell, and
   * poll while one runs.
   */
  private _onIopub(_: ISessionContext, msg: KernelMessage.IMessage): void {
    if (msg.header.msg_type !== 'status') {
      return;
    }
    const parent = msg.parent_header as Partial<KernelMessage.IHeader> & { subshell_id?: string | null };
    if (parent.msg_type !== 'execute_request' || (parent.subshell_id ?? null) !== null) {
      return;
    }
    const state = (msg as KernelMessage.IStatusMsg).content.execution_state;
    if (state === 'busy') {
      this.mainBusy = true;
      // The user moved on: the last action's message (and a preview) no longer describes the kernel.
      if (this.pendingAction === '') {
        this.lastAction = null;
        this.preview = null;
      }
      this._startPolling();
      this._changed.emit();
    } else if (state === 'idle') {
      this.mainBusy = false;
      this._stopPolling();
      this.namesError = '';
      if (this._channel === null) {
        if (this.state !== 'loading') {
          this._autoConnect();
        }
      } else if (this._active) {
        void this.refresh();
      }
      this._changed.emit();
    }
  }

  private _startPolling(): void {
    if (this._poll !== null || this._channel === null || !this._active) {
      return;
    }
    void this.refreshNames();
    this._schedulePoll();
  }

  /**
   * One poll round after `_pollDelay`, then the next, while a cell runs or
   * replies are being lost. Each round sends at most one request of each kind
   * (the single flights coalesce the rest); while flooding, the wait doubles
   * per round up to MAX_POLL_MS and drops back as soon as a reply arrives.
   */
  private _schedulePoll(): void {
    if (this._poll !== null || this._channel === null || !this._active) {
      return;
    }
    this._poll = window.setTimeout(() => {
      this._poll = null;
      const channel = this._channel;
      if (channel === null || !this._active || !(this.mainBusy || this.flooding)) {
        return;
      }
      if (this.flooding) {
        this._pollDelay = Math.min(this._pollDelay * 2, MAX_POLL_MS);
      }
      if (!this.mainBusy) {
        void this.refresh(); // the cell ended during a flood: ask for everything until answered
      } else if (channel.overSubshell) {
        void this.refreshNames();
        void this._refreshStatus();
      } else {
        void this.refreshNames(); // sets the "busy" note without sending
      }
      this._schedulePoll();
    }, this._pollDelay);
  }

  private _stopPolling(): void {
    if (this._poll !== null) {
      window.clearTimeout(this._poll);
      this._poll = null;
    }
  }

  private _kernel(): Kernel.IKernelConnection | null {
    return this._context?.session?.kernel ?? null;
  }

  private _dropChannel(): void {
    this._stopPolling();
    const channel = this._channel;
    this._channel = null;
    this._channelKernel = null;
    channel?.dispose();
  }

  private _clearAnswers(): void {
    this.hello = null;
    this.status = null;
    this.fromLog = false;
    this.statusError = '';
    this.names = [];
    this._namesKey = '';
    this.namesVersion += 1;
    this.namesTotal = null;
    this.flooding = false;
    this._pollDelay = BUSY_POLL_MS;
    this.namesAt = null;
    this.namesElapsedMs = null;
    this.namesTruncated = false;
    this.namesError = '';
    this.compactions = [];
    this.preview = null;
    this.lastAction = null;
    this.recallAsked = '';
    this.recallHits = [];
    this.recallError = '';
  }

  private _setState(state: ConnectionState, detail: string): void {
    this.state = state;
    this.stateDetail = detail;
    if (state === 'not-loaded' && this.status === null) {
      void this._loadPersisted();
    }
    this._changed.emit();
  }

  /**
   * What the session log holds for this notebook (gauge figures, timeline),
   * served by the package's server extension while the kernel has no
   * extension loaded. Optional: without the server extension nothing changes.
   */
  private async _loadPersisted(): Promise<void> {
    const path = this.notebookLabel;
    if (!path) {
      return;
    }
    const settings = ServerConnection.makeSettings();
    const url = `${settings.baseUrl.replace(/\/$/, '')}/ipython-compact/session?path=${encodeURIComponent(path)}`;
    try {
      const response = await ServerConnection.makeRequest(url, {}, settings);
      if (!response.ok) {
        return;
      }
      const data = (await response.json()) as Json;
      if (this.status !== null || this.state !== 'not-loaded' || data['exists'] !== true) {
        return;
      }
      if (!isObject(data['status'])) {
        return;
      }
      this.status = parseStatus(data['status']);
      const list = Array.isArray(data['compactions']) ? data['compactions'] : [];
      this.compactions = list.map(parseCompaction).filter((c): c is ICompaction => c !== null);
      this.fromLog = true;
      this._changed.emit();
    } catch (err) {
      console.warn('ipython-compact: no persisted session from the server', err);
    }
  }

  private _context: ISessionContext | null;
  private _channel: CompactChannel | null = null;
  private _channelKernel: Kernel.IKernelConnection | null = null;
  private _connecting: Promise<void> | null = null;
  private _connectingFor: Kernel.IKernelConnection | null = null;
  private _namesFlight = new SingleFlight(() => this._refreshNames());
  private _statusFlight = new SingleFlight(() => this._askStatus());
  private _summariesFlight = new SingleFlight(() => this._askSummaries());
  private _namesKey = '';
  private _pollDelay = BUSY_POLL_MS;
  private _poll: number | null = null;
  private _disposed = false;
  private _active = false;
  private _changed = new Signal<this, void>(this);
}

/**
 * Which notebook the panel shows, and one `NotebookModel` per open notebook.
 *
 * What must hold: a model lives exactly as long as its notebook's session
 * context (it is dropped and its channel closed when the context is
 * disposed); only the shown model is active (polls, refreshes after cells);
 * the others keep listening for restarts so their banners survive a switch.
 */
export class PanelModel {
  /** Fires when the shown notebook changes or the shown model changes. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** The model of the notebook the panel shows (an empty one when none). */
  get current(): NotebookModel {
    return this._current;
  }

  /** Show this notebook's model (creating it on first sight), or the empty one. */
  follow(context: ISessionContext | null, label: string): void {
    const next = context === null ? this._empty : this._modelFor(context);
    next.notebookLabel = context === null ? '' : label;
    if (next === this._current) {
      this._changed.emit();
      return;
    }
    this._current.setActive(false);
    this._current = next;
    next.setActive(this._active);
    this._changed.emit();
  }

  /** The panel is shown or hidden: only the shown notebook's model is ever active. */
  setActive(active: boolean): void {
    this._active = active;
    this._current.setActive(active);
  }

  /** Close every notebook's comm now (the page is going away); nothing is reopened. */
  releaseAll(): void {
    for (const model of this._models.values()) {
      model.release();
    }
    // Leaving can still be cancelled (Lab asks about unsaved work): if the page is alive a
    // moment later, the shown notebook connects again.
    window.setTimeout(() => this._current.setActive(this._active), 1000);
  }

  dispose(): void {
    for (const model of this._models.values()) {
      model.dispose();
    }
    this._models.clear();
    this._empty.dispose();
    Signal.clearData(this);
  }

  private _modelFor(context: ISessionContext): NotebookModel {
    let model = this._models.get(context);
    if (model === undefined) {
      const created = new NotebookModel(context, '');
      created.changed.connect(this._onModelChanged, this);
      context.disposed.connect(() => this._forget(context, created));
      this._models.set(context, created);
      model = created;
    }
    return model;
  }

  private _forget(context: ISessionContext, model: NotebookModel): void {
    this._models.delete(context);
    model.changed.disconnect(this._onModelChanged, this);
    model.dispose();
    if (this._current === model) {
      this._current = this._empty;
      this._changed.emit();
    }
  }

  private _onModelChanged(sender: NotebookModel): void {
    if (sender === this._current) {
      this._changed.emit();
    }
  }

  private _models = new Map<ISessionContext, NotebookModel>();
  private _empty = new NotebookModel(null, '');
  private _current: NotebookModel = this._empty;
  private _active = false;
  private _changed = new Signal<this, void>(this);
}

/** A list's length or a number as-is (the kernel may send either). */
function countOf(value: unknown): number {
  if (Array.isArray(value)) {
    return value.length;
  }
  return typeof value === 'number' ? value : 0;
}

/** `[{name, reason}, ...]` (as `skipped` and `failed` are sent) as "a (why), b (why)". */
function namesWithReasons(items: unknown[]): string {
  return items.map(i => (isObject(i) ? `${String(i['name'])} (${String(i['reason'])})` : String(i))).join(', ');
}

function describeError(err: unknown, what: string): string {
  if (err instanceof RequestError && err.code === 'nothing_to_compact') {
    return `Not compacted: ${err.message}.`;
  }
  if (err instanceof RequestError) {
    return `${what} failed (${err.code}): ${err.message}`;
  }
  return `${what} failed: ${String(err)}`;
}
