/**
 * The panel's models.
 *
 * `NotebookModel` belongs to one notebook's session context for as long as
 * that notebook is open. It is assembled from parts, one role each (as
 * jupyterlab-variableInspector splits connector, handler, manager and view):
 *
 * - `connector` (connector.ts): the kernel, the channel, the connection state,
 *   whether a cell runs;
 * - `poller` (poller.ts): when to ask again while a cell runs, and the back-off
 *   while an output flood drops replies;
 * - `path` (requests.ts): the one request path every read and action takes;
 * - `reads` (reads.ts): what the kernel (or the session log) last answered;
 * - `actions` (actions.ts): the user's actions and what the panel says of them;
 * - `view` (view_state.ts): what the user typed and chose in the panel.
 *
 * This class only wires them: when to read (after each cell, every few seconds
 * while a cell runs on a kernel with subshells, after a restart), and who is
 * looking (the panel, the wide namespace view). `PanelModel` keeps one
 * `NotebookModel` per open notebook and says which one the panel shows.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { ServerConnection } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { NotebookActions } from './actions';
import { ConnectionState, KernelConnector } from './connector';
import { Poller } from './poller';
import { ACTION_TIMEOUT_MS } from './actions';
import { IInspectReply, Json, parseInspect } from './protocol';
import { KernelReads } from './reads';
import { Outcome, RequestPath } from './requests';
import { NotebookViewState } from './view_state';

/** What the panel says instead of an error while replies are lost to an output flood. */
export const FLOOD_NOTE = 'kernel output is flooding; the panel will refresh when it calms down';

/** Why Compact and Preview are disabled in a session with no model conversation. */
export const NO_CONVERSATION_NOTE =
  'No model conversation in this session yet. The gauge fills when an %%agent cell runs ' +
  'or a transcript is imported with %compact import FILE.';

/**
 * Tell the server extension that an open notebook's path changed (a rename, a
 * move, a Save As), so its session follows it and a restarted kernel finds its
 * snapshots and timeline (the server also sees renames itself; a second report
 * of the same move changes nothing). Optional: without the server extension
 * nothing happens.
 */
export async function reportMoved(from: string, to: string): Promise<void> {
  const settings = ServerConnection.makeSettings();
  const url = `${settings.baseUrl.replace(/\/$/, '')}/ipython-compact/moved`;
  try {
    const response = await ServerConnection.makeRequest(url, { method: 'POST', body: JSON.stringify({ from, to }) }, settings);
    if (!response.ok) {
      console.warn(`ipython-compact: the server did not record the move ${from} → ${to} (${response.status})`);
    }
  } catch (err) {
    console.warn('ipython-compact: could not report a notebook move to the server', err);
  }
}

/** Who keeps a notebook model active (it asks its kernel only while someone looks). */
export type Viewer = 'panel' | 'wide';

/** One open notebook's connection, answers and pending user state. */
export class NotebookModel {
  constructor(context: ISessionContext | null, label: string) {
    this.notebookLabel = label;
    this.poller = new Poller({
      canPoll: () => this.connector.channel !== null && this.connector.active,
      mainBusy: () => this.connector.mainBusy,
      onRound: cellEnded => this._pollRound(cellEnded),
      onFloodChanged: () => this._changed.emit()
    });
    this.path = new RequestPath({
      channel: () => this.connector.channel,
      mainBusy: () => this.connector.mainBusy,
      flooding: () => this.poller.flooding,
      answered: () => {
        this.poller.answered();
      },
      absorbs: (err, sentBusy) => this.poller.absorbs(err, sentBusy),
      emit: () => this._changed.emit()
    });
    this.reads = new KernelReads(
      this.path,
      () => this._changed.emit(),
      status => {
        this.connector.cellStateSeen(status.cell);
        // The kernel has no earlier snapshot waiting any more (a `%compact restore` in a cell took
        // it, or it was discarded): the "Restore variables?" banner no longer asks anything.
        if (status.restore_pending === false) {
          this.actions.restoreSettled();
        }
      }
    );
    this.actions = new NotebookActions({
      path: this.path,
      ensureConnected: load => this._ensureConnected(load),
      refresh: () => this.refresh(),
      emit: () => this._changed.emit()
    });
    this.connector = new KernelConnector(context, {
      stateChanged: () => this._changed.emit(),
      connected: () => {
        if (this.connector.mainBusy) {
          this._startPolling();
        }
        void this.refresh();
      },
      dropped: reason => this._dropped(reason),
      cell: busy => this._cell(busy),
      notLoaded: () => {
        if (this.reads.status === null) {
          void this._loadPersisted();
        }
      }
    });
  }

  /** Fires whenever anything a view shows has changed. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** Label of the followed notebook (its path), or '' when none. */
  notebookLabel = '';
  readonly connector: KernelConnector;
  readonly poller: Poller;
  readonly path: RequestPath;
  readonly reads: KernelReads;
  readonly actions: NotebookActions;
  readonly view = new NotebookViewState();

  get state(): ConnectionState {
    return this.connector.state;
  }

  get stateDetail(): string {
    return this.connector.stateDetail;
  }

  /** True while the main shell runs a user cell. */
  get mainBusy(): boolean {
    return this.connector.mainBusy;
  }

  /** Replies are being lost while the kernel floods its output; the poll has backed off. */
  get flooding(): boolean {
    return this.poller.flooding;
  }

  /** Whether requests are answered while a cell runs (comm on a subshell). */
  get liveWhileBusy(): boolean {
    return this.connector.channel?.overSubshell ?? false;
  }

  /** The session has no model conversation: there is nothing to compact or preview. */
  get noConversation(): boolean {
    const s = this.reads.status;
    if (s === null) {
      return false;
    }
    return s.conversation === false || (s.conversation === null && s.entries === 0);
  }

  /** The session context this model belongs to (null for the "no notebook" model). */
  get context(): ISessionContext | null {
    return this.connector.context;
  }

  /**
   * A viewer starts (true) or stops (false) looking at this notebook. Nothing is
   * sent to a kernel until someone looks: a notebook whose user never opens the
   * panel gets no comm and no subshell. Restarts are still noticed meanwhile.
   */
  setActive(active: boolean, viewer: Viewer = 'panel'): void {
    if (active) {
      this._viewers.add(viewer);
    } else {
      this._viewers.delete(viewer);
    }
    const now = this._viewers.size > 0;
    this.connector.setActive(now);
    if (!now) {
      this.poller.stop();
      return;
    }
    const context = this.connector.context;
    if (context === null) {
      return;
    }
    void context.ready.then(() => {
      if (this.connector.context !== context || !this.connector.active) {
        return;
      }
      if (this.connector.channel === null) {
        void this.connect();
      } else {
        void this.refresh();
        if (this.connector.mainBusy) {
          this._startPolling();
        }
      }
    });
  }

  /** (Re)open the channel to the current kernel. */
  connect(): Promise<void> {
    return this.connector.connect();
  }

  /** Run `%load_ext ipython_compact` in the kernel, then connect. */
  loadExtension(): Promise<void> {
    return this.connector.loadExtension();
  }

  /** Re-read status, names, the timeline and the call tree. */
  async refresh(): Promise<void> {
    if (this.connector.channel === null) {
      return;
    }
    await this.reads.readAll();
  }

  /** Re-read the namespace (shows a busy note instead when it cannot be answered now). */
  refreshNames(): Promise<void> {
    if (this.connector.channel === null) {
      return Promise.resolve();
    }
    return this.reads.readNames();
  }

  /** The first rows of `name`'s value as a table (the kernel's `inspect`; nothing is evaluated). */
  async inspect(name: string): Promise<Outcome<IInspectReply>> {
    await this._ensureConnected(false);
    return this.path.ask('inspect', { name, rows: 50, cols: 20 }, parseInspect, { timeoutMs: ACTION_TIMEOUT_MS });
  }

  /** Close the comm (the kernel then releases its subshell) and stop asking, e.g. when the page unloads. */
  release(): void {
    this._viewers.clear();
    this.connector.release();
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this.poller.reset();
    this.connector.dispose();
    Signal.clearData(this);
  }

  private async _ensureConnected(load: boolean): Promise<void> {
    // Right after a restart the panel may still be finding out whether the
    // extension is loaded in the new kernel; settle that first.
    const attempt = this.connector.connecting;
    if (attempt !== null) {
      await attempt;
    }
    if (load && this.connector.state === 'not-loaded') {
      await this.connector.loadExtension();
    } else if (this.connector.channel === null) {
      await this.connector.connect();
    }
  }

  private _dropped(reason: 'kernel-changed' | 'restarting' | 'dead' | 'closed' | 'released'): void {
    if (reason === 'closed' || reason === 'released' || reason === 'dead') {
      this.poller.stop();
      return;
    }
    this.poller.reset();
    this.reads.clear();
    if (reason === 'restarting') {
      this.actions.restarted();
    } else {
      this.actions.forget();
    }
  }

  /** A user cell started or finished on the main shell: poll while it runs, read everything after it. */
  private _cell(busy: boolean): void {
    if (busy) {
      this.actions.cellStarted();
      this._startPolling();
    } else {
      this.poller.stop();
      this.reads.namesError = '';
      if (this.connector.channel !== null && this.connector.active) {
        void this.refresh();
      }
    }
    this._changed.emit();
  }

  private _startPolling(): void {
    if (this.poller.scheduled || this.connector.channel === null || !this.connector.active) {
      return;
    }
    void this.refreshNames();
    this.poller.schedule();
  }

  /** One poll round: everything after a flood outlived its cell, else what changes while a cell runs. */
  private _pollRound(cellEnded: boolean): void {
    const channel = this.connector.channel;
    if (cellEnded) {
      void this.refresh(); // the cell ended during a flood: ask for everything until answered
    } else if (channel !== null && channel.overSubshell) {
      void this.reads.readNames();
      void this.reads.readStatus();
    } else {
      void this.reads.readNames(); // sets the "busy" note without sending
    }
  }

  /**
   * What the session log holds for this notebook (gauge figures, timeline, call
   * tree, snapshots on disk), served by the package's server extension while the
   * kernel has no extension loaded. Optional: without the server extension nothing changes.
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
      if (this.reads.status !== null || this.connector.state !== 'not-loaded') {
        return;
      }
      if (this.reads.applyPersisted(data)) {
        this._changed.emit();
      }
    } catch (err) {
      console.warn('ipython-compact: no persisted session from the server', err);
    }
  }

  private _viewers = new Set<Viewer>();
  private _disposed = false;
  private _changed = new Signal<this, void>(this);
}

/**
 * Which notebook the panel shows, and one `NotebookModel` per open notebook.
 *
 * What must hold: a model lives exactly as long as its notebook's session
 * context (it is dropped and its channel closed when the context is
 * disposed); only a looked-at model is active (polls, refreshes after cells);
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
    const next = context === null ? this._empty : this.modelFor(context);
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

  /** The panel is shown or hidden: only the shown notebook's model is active for the panel. */
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

  /**
   * A notebook's path changed (rename, move, Save As): its model's label
   * follows at once (the header said "Untitled.ipynb" after a rename), and
   * what the log holds is read again under the new path.
   */
  pathChanged(context: ISessionContext, path: string): void {
    const model = this._models.get(context);
    if (model === undefined) {
      return;
    }
    model.notebookLabel = path;
    if (model === this._current) {
      this._changed.emit();
    }
  }

  /** The model of `context`'s notebook, created on first sight. */
  modelFor(context: ISessionContext): NotebookModel {
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
