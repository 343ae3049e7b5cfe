/**
 * When the panel asks again on its own: every BUSY_POLL_MS while a cell runs,
 * and with a growing wait while replies are being lost to an output flood.
 *
 * Why a flood is not an error: jupyter_server's IOPub rate limiter drops
 * messages (the panel's replies among them) while a cell prints faster than
 * 1,000 messages a second. A request sent while the main shell ran a cell (or
 * while already flooding) that then times out is that, not a fault: the poll
 * backs off (doubling up to MAX_POLL_MS) and the panel says so; the first
 * reply that arrives ends it.
 *
 * What must hold: at most one timer is pending; each round calls `onRound`
 * once; nothing is scheduled while `shouldPoll()` is false. The clock is
 * injected, so the back-off is unit-tested without waiting.
 */
import { RequestError } from './errors';

/** How often the namespace is re-read while a cell runs (ms). */
export const BUSY_POLL_MS = 2000;

/** The longest the poll waits between asks while replies are being lost to an output flood (ms). */
export const MAX_POLL_MS = 16000;

/** The timer functions the poller uses (the browser's by default). */
export interface IClock {
  setTimeout(fn: () => void, ms: number): number;
  clearTimeout(handle: number): void;
}

export const BROWSER_CLOCK: IClock = {
  setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms) as unknown as number,
  clearTimeout: handle => globalThis.clearTimeout(handle)
};

export interface IPollerHooks {
  /** Whether polling may run at all now (connected, panel shown). */
  canPoll(): boolean;
  /** Whether the main shell runs a user cell now. */
  mainBusy(): boolean;
  /** One round: ask for what should be fresh. `cellEnded`: the cell finished during a flood. */
  onRound(cellEnded: boolean): void;
  /** The flooding flag changed. */
  onFloodChanged(): void;
}

export class Poller {
  constructor(hooks: IPollerHooks, clock: IClock = BROWSER_CLOCK) {
    this._hooks = hooks;
    this._clock = clock;
  }

  /** Replies are being lost while the kernel floods its output; the poll has backed off. */
  get flooding(): boolean {
    return this._flooding;
  }

  /** The current wait between rounds (ms): BUSY_POLL_MS, doubled per round while flooding. */
  get delayMs(): number {
    return this._delay;
  }

  /** Whether a round is scheduled. */
  get scheduled(): boolean {
    return this._timer !== null;
  }

  /** Schedule the next round (no-op when one is pending or polling is not possible). */
  schedule(): void {
    if (this._timer !== null || !this._hooks.canPoll()) {
      return;
    }
    this._timer = this._clock.setTimeout(() => {
      this._timer = null;
      const busy = this._hooks.mainBusy();
      if (!this._hooks.canPoll() || !(busy || this._flooding)) {
        return;
      }
      if (this._flooding) {
        this._delay = Math.min(this._delay * 2, MAX_POLL_MS);
      }
      this._hooks.onRound(!busy);
      this.schedule();
    }, this._delay);
  }

  stop(): void {
    if (this._timer !== null) {
      this._clock.clearTimeout(this._timer);
      this._timer = null;
    }
  }

  /** Forget the back-off (a new kernel or channel). */
  reset(): void {
    this.stop();
    this._flooding = false;
    this._delay = BUSY_POLL_MS;
  }

  /** A reply came back: leave the flood back-off. Returns whether anything changed. */
  answered(): boolean {
    if (!this._flooding && this._delay === BUSY_POLL_MS) {
      return false;
    }
    const was = this._flooding;
    this._flooding = false;
    this._delay = BUSY_POLL_MS;
    if (was) {
      this._hooks.onFloodChanged();
    }
    return true;
  }

  /**
   * A request failed. Returns true when it is the flood (a timeout of a request sent
   * while busy or flooding, or while busy now): the poller backs off and nothing is an error.
   */
  absorbs(err: unknown, sentBusy: boolean): boolean {
    const busy = sentBusy || this._hooks.mainBusy() || this._flooding;
    if (!(err instanceof RequestError && err.code === 'timeout' && busy)) {
      return false;
    }
    if (!this._flooding) {
      this._flooding = true;
      this._hooks.onFloodChanged();
    }
    this.schedule();
    return true;
  }

  private _hooks: IPollerHooks;
  private _clock: IClock;
  private _flooding = false;
  private _delay = BUSY_POLL_MS;
  private _timer: number | null = null;
}
