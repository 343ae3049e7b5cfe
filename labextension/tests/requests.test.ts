/** The one request path: guard → request → stale check → failure → emit. */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { RequestError } from '../src/errors';
import { IRequestHost, QUEUED_NOTE, RequestPath, SingleFlight } from '../src/requests';
import { FakeChannel, settle } from './fakes';

class Host implements IRequestHost {
  current: FakeChannel | null = new FakeChannel();
  busy = false;
  flood = false;
  answeredCalls = 0;
  emits = 0;
  absorbAll = false;

  channel(): FakeChannel | null {
    return this.current;
  }
  mainBusy(): boolean {
    return this.busy;
  }
  flooding(): boolean {
    return this.flood;
  }
  answered(): void {
    this.answeredCalls += 1;
  }
  absorbs(err: unknown, sentBusy: boolean): boolean {
    return this.absorbAll && err instanceof RequestError && err.code === 'timeout' && sentBusy;
  }
  emit(): void {
    this.emits += 1;
  }
}

test('an answered request is parsed, counts as an answer and emits once', async () => {
  const host = new Host();
  const path = new RequestPath(host);
  const asked = path.ask('status', { a: 1 }, reply => reply['tokens'], { timeoutMs: 1234 });
  const sent = host.current!.answer({ tokens: 42 });
  assert.deepEqual([sent.op, sent.args, sent.timeoutMs], ['status', { a: 1 }, 1234]);
  assert.deepEqual(await asked, { kind: 'ok', value: 42 });
  assert.equal(host.answeredCalls, 1);
  assert.equal(host.emits, 1);
});

test('the outcome is applied before the view is told', async () => {
  const host = new Host();
  const path = new RequestPath(host);
  const seen: string[] = [];
  let state = 'before';
  host.emit = () => {
    seen.push(state);
  };
  const asked = path.ask('status', {}, reply => String(reply['tokens']), {}, out => {
    state = out.kind === 'ok' ? out.value : 'failed';
  });
  host.current!.answer({ tokens: 7 });
  await asked;
  assert.deepEqual(seen, ['7']);
});

test('a reply or failure from a channel dropped meanwhile is stale and changes nothing', async () => {
  const host = new Host();
  const path = new RequestPath(host);
  const old = host.current!;
  const first = path.ask('names', {}, () => 'parsed');
  const second = path.ask('names', {}, () => 'parsed');
  host.current = new FakeChannel();
  old.answer({});
  old.fail(new RequestError('timeout', 'late'));
  assert.deepEqual(await first, { kind: 'stale' });
  assert.deepEqual(await second, { kind: 'stale' });
  assert.equal(host.answeredCalls, 0);
  assert.equal(host.emits, 0);
});

test('nothing is sent without a channel, or while a cell runs on a kernel without subshells', async () => {
  const host = new Host();
  host.current = null;
  const path = new RequestPath(host);
  assert.deepEqual(await path.ask('compact', {}, () => 0), {
    kind: 'not-sent',
    reason: 'not-connected',
    text: 'Not connected: cannot compact.'
  });
  host.current = new FakeChannel(false);
  host.busy = true;
  assert.deepEqual(await path.ask('names', {}, () => 0), { kind: 'not-sent', reason: 'queued', text: QUEUED_NOTE });
  assert.equal(host.current.sent.length, 0);
  // An action the user asked for is sent anyway: it waits behind the cell.
  const action = path.ask('snapshot', {}, () => 'done', { evenWhenQueued: true });
  host.current.answer({});
  assert.deepEqual(await action, { kind: 'ok', value: 'done' });
});

test('a timeout under a flood is absorbed for reads, and an error for actions', async () => {
  const host = new Host();
  host.absorbAll = true;
  host.busy = true;
  const path = new RequestPath(host);
  const read = path.ask('names', {}, () => 0, { floodAware: true });
  const action = path.ask('compact', {}, () => 0);
  host.current!.fail(new RequestError('timeout', 'names got no answer within 5 s'));
  host.current!.fail(new RequestError('timeout', 'compact got no answer within 120 s'));
  assert.deepEqual(await read, { kind: 'flood' });
  const failed = await action;
  assert.equal(failed.kind, 'failed');
  assert.equal(failed.kind === 'failed' && failed.text, 'compact failed (timeout): compact got no answer within 120 s');
  assert.equal(host.emits, 2);
});

test('a kernel error reply is described with its code', async () => {
  const host = new Host();
  const path = new RequestPath(host);
  const asked = path.ask('compact', {}, () => 0);
  host.current!.fail(new RequestError('nothing_to_compact', 'nothing to compact: 3 entries'));
  const out = await asked;
  assert.equal(out.kind === 'failed' && out.text, 'Not compacted: nothing to compact: 3 entries.');
});

test('a parse that throws fails the request', async () => {
  const host = new Host();
  const path = new RequestPath(host);
  const asked = path.ask('status', {}, () => {
    throw new Error('bad shape');
  });
  host.current!.answer({});
  const out = await asked;
  assert.equal(out.kind === 'failed' && out.text, 'status failed: Error: bad shape');
});

test('a single flight runs once at a time and coalesces asks into one follow-up run', async () => {
  let runs = 0;
  const releases: (() => void)[] = [];
  const flight = new SingleFlight(() => {
    runs += 1;
    return new Promise<void>(resolve => releases.push(resolve));
  });
  const a = flight.run();
  const b = flight.run();
  const c = flight.run();
  assert.equal(runs, 1);
  assert.equal(b, c);
  releases.shift()!();
  await a;
  await settle();
  assert.equal(runs, 2);
  releases.shift()!();
  await b;
  assert.equal(flight.busy, false);
});
