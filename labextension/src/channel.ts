/**
 * The request/response channel to the kernel side: one frontend-opened comm on
 * target `ipython_compact`.
 *
 * Why frontend-opened: with ipykernel 7 a comm is pinned to whichever shell the
 * kernel last sent on, so only a comm that the frontend opens and the kernel
 * answers from inside its handler stays on the subshell JupyterLab (>= 4.4)
 * creates per comm target. That is what lets the panel be answered while a cell
 * runs. The subshell is created asynchronously, so we wait for it before
 * `open()`; if we did not, the open would queue behind the running cell and
 * later messages could reach the kernel before the comm exists.
 *
 * What must hold: every request carries an id, is answered by the reply with
 * the same id, and fails after a timeout instead of hanging; a comm the kernel
 * closes (the extension is not loaded) rejects everything pending.
 */
import { CommsOverSubshells, Kernel, KernelMessage } from '@jupyterlab/services';
import { UUID } from '@lumino/coreutils';
import { ISignal, Signal } from '@lumino/signaling';

import { RequestError } from './errors';
import { COMM_TARGET, isObject, Json, Op, PROTOCOL_VERSION, stringField } from './protocol';

export { RequestError };

/** Default time a request may take before the panel gives up on it (ms). */
export const REQUEST_TIMEOUT_MS = 5000;

/** How long a kernel may take to start and answer kernel_info before connecting gives up (ms). */
export const KERNEL_INFO_TIMEOUT_MS = 60000;

/** `CommHandler` exposes `subshellStarted` and `subshellId`, but the class is not exported. */
interface ISubshellAware {
  readonly subshellStarted: Promise<void>;
  readonly subshellId?: string | null;
}

function isSubshellAware(comm: Kernel.IComm): comm is Kernel.IComm & ISubshellAware {
  const candidate = (comm as Partial<ISubshellAware>).subshellStarted;
  return candidate instanceof Promise;
}

/** Resolve with the promise's value, or reject with a timeout error after `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = window.setTimeout(() => {
      reject(new RequestError('timeout', `${what} got no answer within ${ms / 1000} s`));
    }, ms);
    promise.then(
      value => {
        window.clearTimeout(timer);
        resolve(value);
      },
      (reason: unknown) => {
        window.clearTimeout(timer);
        reject(reason);
      }
    );
  });
}

interface IPending {
  resolve: (reply: Json) => void;
  reject: (error: RequestError) => void;
  timer: number;
}

/**
 * One open comm to the kernel side of one kernel connection.
 *
 * Create it with `CompactChannel.connect`; it is unusable after `closed` fires.
 */
export class CompactChannel {
  private constructor(kernel: Kernel.IKernelConnection, comm: Kernel.IComm, overSubshell: boolean) {
    this._kernel = kernel;
    this._comm = comm;
    this.overSubshell = overSubshell;
    comm.onMsg = msg => this._onMsg(msg);
    comm.onClose = () => this._onClose();
  }

  /**
   * Open the comm (on a subshell when the kernel and JupyterLab support it)
   * and say hello. Rejects with code `not_loaded` when the kernel closes the
   * comm because no `ipython_compact` target is registered.
   */
  static async connect(
    kernel: Kernel.IKernelConnection,
    timeoutMs: number = REQUEST_TIMEOUT_MS
  ): Promise<{ channel: CompactChannel; hello: Json }> {
    // A kernel that is still starting answers kernel_info late; that is not a failed request.
    await withTimeout(kernel.info, Math.max(timeoutMs, KERNEL_INFO_TIMEOUT_MS), 'kernel_info');
    const comm = kernel.createComm(COMM_TARGET);
    let overSubshell = false;
    const wantsSubshell =
      kernel.supportsSubshells && kernel.commsOverSubshells !== CommsOverSubshells.Disabled;
    if (wantsSubshell && isSubshellAware(comm)) {
      try {
        await withTimeout(comm.subshellStarted, timeoutMs, 'create_subshell');
        overSubshell = true;
      } catch (err) {
        console.warn('ipython-compact: no subshell for the comm, using the main shell', err);
      }
    }
    const channel = new CompactChannel(kernel, comm, overSubshell);
    comm.open({ v: PROTOCOL_VERSION });
    try {
      const hello = await channel.request('hello', {}, timeoutMs);
      return { channel, hello };
    } catch (err) {
      channel.dispose();
      throw err;
    }
  }

  /** Whether requests travel on a subshell (answered while a cell runs). */
  readonly overSubshell: boolean;

  /** Fires once when the comm is closed by either side or disposed. */
  get closed(): ISignal<this, void> {
    return this._closed;
  }

  get isClosed(): boolean {
    return this._isClosed;
  }

  /**
   * Send one request and resolve with the matching `ok: true` reply.
   * Rejects with a `RequestError` on timeout, close, or an error reply.
   */
  request(op: Op, args: Json = {}, timeoutMs: number = REQUEST_TIMEOUT_MS): Promise<Json> {
    if (this._isClosed) {
      return Promise.reject(
        new RequestError(this._closedCode, `the comm is closed; cannot send ${op}`)
      );
    }
    const id = UUID.uuid4();
    return new Promise<Json>((resolve, reject) => {
      const timer = window.setTimeout(() => {
        this._pending.delete(id);
        reject(new RequestError('timeout', `${op} got no answer within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      this._pending.set(id, { resolve, reject, timer });
      try {
        this._comm.send({ ...args, v: PROTOCOL_VERSION, id, op });
      } catch (err) {
        window.clearTimeout(timer);
        this._pending.delete(id);
        reject(new RequestError('closed', `could not send ${op}: ${String(err)}`));
      }
    });
  }

  /** Close the comm (if still open) and reject whatever is pending. */
  dispose(): void {
    if (this._isClosed) {
      return;
    }
    try {
      this._comm.close();
    } catch {
      // The kernel may already be gone; closing is best effort.
    }
    this._onClose();
  }

  /**
   * The page is going away: tell the kernel the comm is closed, and nothing else.
   *
   * Why not `dispose()`: JupyterLab's comm then also asks, on the control channel, to delete
   * the per-target subshell, and that request overtakes the `comm_close` queued on the very
   * subshell it deletes, so the kernel never hears of the close and keeps the comm. The kernel
   * deletes the subshell itself once the close has been handled (kernel/comm_handler.py).
   */
  abandon(): void {
    if (this._isClosed) {
      return;
    }
    const subshellId = isSubshellAware(this._comm) ? this._comm.subshellId ?? null : null;
    try {
      const msg = KernelMessage.createMessage({
        msgType: 'comm_close',
        channel: 'shell',
        username: this._kernel.username,
        session: this._kernel.clientId,
        subshellId: subshellId ?? this._kernel.subshellId,
        content: { comm_id: this._comm.commId, data: {} }
      });
      this._kernel.sendShellMessage(msg, false, true);
    } catch {
      // The connection may already be gone; the kernel then keeps the comm until it stops.
    }
    this._onClose();
  }

  private _onMsg(msg: KernelMessage.ICommMsgMsg): void {
    const data: unknown = msg.content.data;
    if (!isObject(data)) {
      return;
    }
    const id = stringField(data, 'id');
    const pending = id === null ? undefined : this._pending.get(id);
    if (id === null || pending === undefined) {
      if (data['ok'] === false) {
        console.warn('ipython-compact: kernel error without a matching request', data['error']);
      }
      return;
    }
    this._answeredOnce = true;
    this._pending.delete(id);
    window.clearTimeout(pending.timer);
    if (data['ok'] === true) {
      pending.resolve(data);
      return;
    }
    const error = data['error'];
    const code = isObject(error) ? stringField(error, 'code') ?? 'failed' : 'failed';
    const message = isObject(error) ? stringField(error, 'message') ?? 'request failed' : 'request failed';
    pending.reject(new RequestError(code, message));
  }

  private _onClose(): void {
    if (this._isClosed) {
      return;
    }
    this._isClosed = true;
    // A close before any reply means the kernel had no target to open.
    if (!this._answeredOnce) {
      this._closedCode = 'not_loaded';
    }
    for (const [, pending] of this._pending) {
      window.clearTimeout(pending.timer);
      pending.reject(
        new RequestError(
          this._closedCode,
          this._closedCode === 'not_loaded'
            ? 'the ipython_compact extension is not loaded in this kernel'
            : 'the comm was closed'
        )
      );
    }
    this._pending.clear();
    this._closed.emit();
    Signal.clearData(this);
  }

  private _kernel: Kernel.IKernelConnection;
  private _comm: Kernel.IComm;
  private _pending = new Map<string, IPending>();
  private _isClosed = false;
  private _answeredOnce = false;
  private _closedCode = 'closed';
  private _closed = new Signal<this, void>(this);
}
