/**
 * Small stand-ins for the kernel channel and the clock, for the unit tests.
 *
 * Why fakes here and not a real kernel: these tests pin the request path's and
 * the poller's rules (stale replies, flood back-off, page walking) exactly,
 * which a real kernel under a real output flood cannot make happen on demand;
 * the browser tests (tests/browser/) run the same code against real ones.
 */
import { Json, Op } from '../src/protocol';
import { IClock } from '../src/poller';
import { IRequestChannel } from '../src/requests';

/** One request the fake channel received, and how to answer it. */
export interface ISent {
  op: Op;
  args: Json;
  timeoutMs?: number;
  resolve(reply: Json): void;
  reject(err: unknown): void;
}

export class FakeChannel implements IRequestChannel {
  constructor(readonly overSubshell = true) {}

  readonly sent: ISent[] = [];

  request(op: Op, args: Json = {}, timeoutMs?: number): Promise<Json> {
    return new Promise<Json>((resolve, reject) => {
      this.sent.push({ op, args, timeoutMs, resolve, reject });
    });
  }

  /** Answer the oldest unanswered request. */
  answer(reply: Json): ISent {
    const next = this.sent.shift();
    if (next === undefined) {
      throw new Error('no request is waiting');
    }
    next.resolve({ ok: true, ...reply });
    return next;
  }

  fail(err: unknown): ISent {
    const next = this.sent.shift();
    if (next === undefined) {
      throw new Error('no request is waiting');
    }
    next.reject(err);
    return next;
  }
}

/** A clock whose timers run only when the test says so. */
export class ManualClock implements IClock {
  readonly timers = new Map<number, { fn: () => void; ms: number }>();

  setTimeout(fn: () => void, ms: number): number {
    const id = this._next++;
    this.timers.set(id, { fn, ms });
    return id;
  }

  clearTimeout(handle: number): void {
    this.timers.delete(handle);
  }

  /** The waits of the pending timers. */
  pending(): number[] {
    return [...this.timers.values()].map(t => t.ms);
  }

  /** Run every pending timer once (timers they set stay pending). */
  fire(): void {
    const now = [...this.timers.entries()];
    for (const [id, timer] of now) {
      this.timers.delete(id);
      timer.fn();
    }
  }

  private _next = 1;
}

/** Let pending promise callbacks run. */
export function settle(): Promise<void> {
  return new Promise(resolve => setImmediate(resolve));
}
