/**
 * One notebook's connection to its kernel side: which kernel, the channel to
 * it, where the connection stands, and whether the main shell runs a cell.
 *
 * What must hold: at most one channel, to the session's current kernel; a
 * channel opened for a kernel that is no longer current is closed, never used;
 * concurrent `connect()` calls share one attempt; a restart or a kernel change
 * drops the channel before anything else is asked; nothing is sent to a kernel
 * before the panel has been shown (`active`).
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { CompactChannel, REQUEST_TIMEOUT_MS } from './channel';
import { describeError, RequestError } from './errors';
import { cellHasEnded, ICellState, Json } from './protocol';

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

/** How long a second connection attempt waits (ms), after a first one timed out on an idle kernel. */
export const PATIENT_CONNECT_MS = 30000;

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

/** What the connector tells its notebook model. */
export interface IConnectorHooks {
  /** The connection state (or its detail) changed. */
  stateChanged(): void;
  /** A channel is open and said hello: read everything. */
  connected(): void;
  /** The channel is gone (kernel changed, restarted, died, or the comm closed): forget its answers. */
  dropped(reason: 'kernel-changed' | 'restarting' | 'dead' | 'closed' | 'released'): void;
  /** A user cell started (true) or finished (false) on the main shell. */
  cell(busy: boolean): void;
  /** The extension is not loaded in this kernel (what the log holds can still be shown). */
  notLoaded(): void;
}

export class KernelConnector {
  constructor(context: ISessionContext | null, hooks: IConnectorHooks) {
    this._context = context;
    this._hooks = hooks;
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

  state: ConnectionState = 'no-notebook';
  stateDetail = '';
  hello: Json | null = null;
  /** True while the main shell runs a user cell. */
  mainBusy = false;

  /** The session context this connector belongs to (null for the "no notebook" model). */
  get context(): ISessionContext | null {
    return this._context;
  }

  /** The open channel, or null. */
  get channel(): CompactChannel | null {
    return this._channel;
  }

  /** Whether the panel is shown for this notebook. */
  get active(): boolean {
    return this._active;
  }

  /** A connection attempt is under way (its promise), or null. */
  get connecting(): Promise<void> | null {
    return this._connecting;
  }

  setActive(active: boolean): void {
    this._active = active;
  }

  /**
   * (Re)open the channel to the current kernel. Concurrent calls share one
   * attempt; a newer kernel makes an older attempt's result be ignored.
   */
  connect(): Promise<void> {
    const kernel = this.kernel();
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

  /** Run `%load_ext ipython_compact` in the kernel, then connect. */
  async loadExtension(): Promise<void> {
    const kernel = this.kernel();
    if (kernel === null) {
      return;
    }
    this.setState('loading', `running ${LOAD_CODE}`);
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
        this.setState('not-loaded', `${LOAD_CODE} failed: ${content.ename}: ${content.evalue}`);
        return;
      }
    } catch (err) {
      this.setState('not-loaded', `${LOAD_CODE} failed: ${String(err)}`);
      return;
    }
    await this.connect();
  }

  /** Connect on the connector's own initiative only while the panel is shown. */
  autoConnect(): void {
    this._autoConnect();
  }

  setState(state: ConnectionState, detail: string): void {
    this.state = state;
    this.stateDetail = detail;
    if (state === 'not-loaded') {
      this._hooks.notLoaded();
    }
    this._hooks.stateChanged();
  }

  /** Close the comm (the kernel then releases its subshell) and stop asking, e.g. when the page unloads. */
  release(): void {
    this._active = false;
    const channel = this._channel;
    this._channel = null;
    this._channelKernel = null;
    channel?.abandon();
    this._hooks.dropped('released');
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
    this._drop();
    this._context = null;
  }

  kernel(): Kernel.IKernelConnection | null {
    return this._context?.session?.kernel ?? null;
  }

  private async _connect(): Promise<void> {
    const kernel = this.kernel();
    if (kernel === null) {
      this._drop();
      this.setState('no-kernel', 'this notebook has no running kernel');
      return;
    }
    if (this._channel !== null && !this._channel.isClosed && this._channelKernel === kernel) {
      return;
    }
    this._drop();
    if (this.state !== 'not-loaded') {
      // Asking again a kernel that said "not loaded" (after each cell) keeps that answer shown until
      // a new one comes: the banner and its "Load extension" button would otherwise flicker away
      // and back, and a press landing on the old button was lost (CI, stop 39).
      this.setState('connecting', 'opening the ipython_compact comm');
    }
    try {
      const { channel, hello } = await this._open(kernel);
      if (this.kernel() !== kernel || this._disposed) {
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
          this._hooks.dropped('closed');
          if (this.state === 'ready') {
            this.setState('connecting', 'the comm was closed');
          }
        }
      });
      this.setState('ready', channel.overSubshell ? 'live while cells run (subshell)' : 'refreshes between cells');
      this._hooks.connected();
    } catch (err) {
      if (this.kernel() !== kernel) {
        return;
      }
      if (err instanceof RequestError && err.code === 'not_loaded') {
        settleStaleStatus(kernel); // the kernel answered (it has no ipython_compact target): it is up
        this.setState('not-loaded', 'the ipython_compact extension is not loaded in this kernel');
      } else if (err instanceof RequestError && err.code === 'timeout' && this.mainBusy) {
        this.setState('error', 'kernel busy: will connect when the running cell finishes');
      } else {
        this.setState('error', describeError(err, 'connect'));
      }
    }
  }

  /**
   * Open the channel; when the first attempt times out on an idle kernel, try once more with a
   * longer wait before saying "error". Why: on a loaded machine a kernel's hello (or its subshell)
   * can take longer than the usual 5 s; the panel then stayed in an error state until the user
   * clicked Retry, and a browser test waiting for a name ran out (issue 35.8). A kernel busy with
   * a cell is not retried here: it connects when the cell ends.
   */
  private async _open(kernel: Kernel.IKernelConnection): Promise<{ channel: CompactChannel; hello: Json }> {
    try {
      return await CompactChannel.connect(kernel, REQUEST_TIMEOUT_MS);
    } catch (err) {
      if (!(err instanceof RequestError && err.code === 'timeout') || this.mainBusy || this.kernel() !== kernel) {
        throw err;
      }
      this.setState('connecting', 'the kernel is slow to answer; waiting longer');
      return await CompactChannel.connect(kernel, PATIENT_CONNECT_MS);
    }
  }

  private _drop(): void {
    const channel = this._channel;
    this._channel = null;
    this._channelKernel = null;
    this.hello = null;
    channel?.dispose();
  }

  private _autoConnect(): void {
    if (this._active) {
      void this.connect();
    }
  }

  private _onKernelChanged(): void {
    this._drop();
    this.mainBusy = false;
    this._hooks.dropped('kernel-changed');
    this._autoConnect();
  }

  private _onStatusChanged(_: ISessionContext, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting') {
      this.mainBusy = false;
      this._drop();
      this._hooks.dropped('restarting');
      this.setState('restarting', 'the kernel is restarting');
    } else if (status === 'dead') {
      this._drop();
      this._hooks.dropped('dead');
      this.setState('dead', 'the kernel is dead');
    } else if (status === 'idle' && (this.state === 'restarting' || this.state === 'dead')) {
      this._autoConnect();
    }
  }

  /**
   * Track user cells on the main shell from IOPub status messages (the session
   * status flickers when subshells report idle).
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
      this._busyRequest = parent.msg_id ?? null;
      this._hooks.cell(true);
    } else if (state === 'idle') {
      if (parent.msg_id !== undefined && parent.msg_id === this._endedByStatus) {
        this._endedByStatus = null; // already ended from the kernel's status: refresh once, not twice
        return;
      }
      this._cellEnded();
    }
  }

  /**
   * What the kernel's own hooks say about the cell (from a `status` reply).
   *
   * Why: in an output flood Jupyter can drop the cell's `idle` message, and the
   * panel would think the cell still runs until its slow poll noticed. The
   * kernel names the cell that runs and the ones that ended; when the cell this
   * connector saw start is among the ended ones and nothing runs, it has ended.
   * A reply about another cell (or from an older kernel) changes nothing.
   */
  cellStateSeen(cell: ICellState | null): void {
    if (this.mainBusy && cellHasEnded(this._busyRequest, cell)) {
      this._endedByStatus = this._busyRequest;
      this._cellEnded();
    }
  }

  private _cellEnded(): void {
    this.mainBusy = false;
    this._busyRequest = null;
    if (this._channel === null && this.state !== 'loading') {
      this._autoConnect();
    }
    this._hooks.cell(false);
  }

  private _busyRequest: string | null = null;
  private _endedByStatus: string | null = null;
  private _context: ISessionContext | null;
  private _hooks: IConnectorHooks;
  private _channel: CompactChannel | null = null;
  private _channelKernel: Kernel.IKernelConnection | null = null;
  private _connecting: Promise<void> | null = null;
  private _connectingFor: Kernel.IKernelConnection | null = null;
  private _disposed = false;
  private _active = false;
}
