/**
 * The one path every request of the panel takes: guard → request → stale
 * check → failure → emit.
 *
 * Why one: the namespace, status, timeline, the six actions and recall each
 * used to repeat these steps by hand, and each copy could forget one (a reply
 * from a channel the panel has since dropped applied to the new kernel's view;
 * a lost reply under an output flood shown as an error).
 *
 * What must hold: a reply or failure that arrives after the channel changed is
 * `stale` and changes nothing; a request that cannot be answered now (not
 * connected; a cell runs and the comm has no subshell) is not sent; a timeout
 * under a flood is absorbed by the poller (`flood`), not shown; `emit` is
 * called once per request that was sent, after its outcome is known and applied.
 */
import { describeError } from './errors';
import { Json, Op } from './protocol';

/** The part of a channel the request path uses (CompactChannel has it). */
export interface IRequestChannel {
  readonly overSubshell: boolean;
  request(op: Op, args?: Json, timeoutMs?: number): Promise<Json>;
}

/** What the path needs to know of its notebook model. */
export interface IRequestHost {
  /** The channel requests go on now (null: not connected). */
  channel(): IRequestChannel | null;
  /** Whether the main shell runs a user cell now. */
  mainBusy(): boolean;
  /** Whether replies are being lost to an output flood now. */
  flooding(): boolean;
  /** A reply arrived (ends a flood back-off). */
  answered(): void;
  /** A request failed; true when the flood explains it (it is then not an error). */
  absorbs(err: unknown, sentBusy: boolean): boolean;
  /** Something the view shows changed. */
  emit(): void;
}

/** How one request ended. */
export type Outcome<T> =
  | { kind: 'ok'; value: T }
  | { kind: 'failed'; text: string; error: unknown }
  | { kind: 'flood' }
  | { kind: 'stale' }
  | { kind: 'not-sent'; reason: 'not-connected' | 'queued'; text: string };

export interface IAskOptions {
  /** Time the reply may take (ms); the channel's default when absent. */
  timeoutMs?: number;
  /** Read requests (names, status, timeline) let the poller absorb a flood's timeouts; actions do not. */
  floodAware?: boolean;
  /** Send even while a cell runs on a kernel without subshells (it then waits behind the cell). */
  evenWhenQueued?: boolean;
}

/** Why a request is not sent while a cell runs on a kernel without subshells. */
export const QUEUED_NOTE =
  'Kernel busy: this kernel has no subshells, so the namespace refreshes when the cell finishes.';

export class RequestPath {
  constructor(host: IRequestHost) {
    this._host = host;
  }

  /**
   * Send `op` and turn its reply into a `T` with `parse` (called only for a
   * fresh `ok` reply; a throw there is a failure of this request). `apply`
   * puts a fresh outcome (not a stale one) into the model before the view is
   * told (`emit`), so the view never draws the state from before the reply.
   */
  async ask<T>(
    op: Op,
    args: Json,
    parse: (reply: Json) => T,
    options: IAskOptions = {},
    apply: (outcome: Outcome<T>) => void = () => undefined
  ): Promise<Outcome<T>> {
    const host = this._host;
    const channel = host.channel();
    if (channel === null) {
      return { kind: 'not-sent', reason: 'not-connected', text: `Not connected: cannot ${op}.` };
    }
    if (host.mainBusy() && !channel.overSubshell && !options.evenWhenQueued) {
      return { kind: 'not-sent', reason: 'queued', text: QUEUED_NOTE };
    }
    const sentBusy = host.mainBusy() || host.flooding();
    let outcome: Outcome<T>;
    try {
      const reply = await channel.request(op, args, options.timeoutMs);
      if (host.channel() !== channel) {
        return { kind: 'stale' };
      }
      host.answered();
      outcome = { kind: 'ok', value: parse(reply) };
    } catch (err) {
      if (host.channel() !== channel) {
        return { kind: 'stale' };
      }
      if (options.floodAware && host.absorbs(err, sentBusy)) {
        outcome = { kind: 'flood' };
      } else {
        outcome = { kind: 'failed', text: describeError(err, op), error: err };
      }
    }
    apply(outcome);
    host.emit();
    return outcome;
  }

  private _host: IRequestHost;
}

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
