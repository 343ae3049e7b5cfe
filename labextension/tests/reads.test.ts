/** The namespace is walked page by page; the table is rebuilt only when the list changed. */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { RequestError } from '../src/errors';
import { cellHasEnded, ICellState, Json, parseCell } from '../src/protocol';
import { KernelReads, readAllNames } from '../src/reads';
import { IRequestHost, Outcome, RequestPath } from '../src/requests';
import { FakeChannel, settle } from './fakes';

type Page = { names: { name: string; type: string }[]; next: string | null; truncated: boolean; total: number | null; elapsedMs: number };

/** A kernel of `count` names v00000.. that answers `limit`/`after` as the probe does. */
function pager(count: number, calls: Json[]): (args: Json) => Promise<Outcome<Page>> {
  const all = Array.from({ length: count }, (_, i) => `v${String(i).padStart(5, '0')}`);
  return async args => {
    calls.push(args);
    const after = typeof args['after'] === 'string' ? args['after'] : null;
    const start = after === null ? 0 : all.indexOf(after) + 1;
    const limit = Number(args['limit']);
    const rows = all.slice(start, start + limit);
    const more = start + rows.length < all.length;
    return {
      kind: 'ok',
      value: {
        names: rows.map(name => ({ name, type: 'int' })),
        next: more ? rows[rows.length - 1] : null,
        truncated: more,
        total: all.length,
        elapsedMs: 1
      }
    };
  };
}

test('every page is walked until the last one', async () => {
  const calls: Json[] = [];
  const out = await readAllNames(pager(25, calls), 10, 20);
  assert.equal(out.kind, 'ok');
  if (out.kind !== 'ok') {
    return;
  }
  assert.equal(out.value.names.length, 25);
  assert.equal(out.value.names[24].name, 'v00024');
  assert.deepEqual([out.value.total, out.value.truncated, out.value.pages, out.value.elapsedMs], [25, false, 3, 3]);
  assert.deepEqual(calls, [{ limit: 10 }, { limit: 10, after: 'v00009' }, { limit: 10, after: 'v00019' }]);
});

test('the walk is bounded: past the page bound the read says names are missing', async () => {
  const calls: Json[] = [];
  const out = await readAllNames(pager(100, calls), 10, 3);
  assert.equal(out.kind === 'ok' && out.value.names.length, 30);
  assert.equal(out.kind === 'ok' && out.value.truncated, true);
  assert.equal(calls.length, 3);
});

test('a failed page fails the whole read (nothing half-read is shown)', async () => {
  let n = 0;
  const out = await readAllNames(async () => {
    n += 1;
    if (n === 2) {
      return { kind: 'failed', text: 'names failed (timeout): late', error: null };
    }
    return { kind: 'ok', value: { names: [{ name: 'a', type: 'int' }], next: 'a', truncated: true, total: 5, elapsedMs: 0 } };
  }, 1, 10);
  assert.deepEqual(out, { kind: 'failed', text: 'names failed (timeout): late', error: null });
});

test('a kernel that sends no `next` (older version) is read in one request', async () => {
  const calls: Json[] = [];
  const out = await readAllNames(async args => {
    calls.push(args);
    return { kind: 'ok', value: { names: [{ name: 'a', type: 'int' }], next: null, truncated: false, total: 1, elapsedMs: 0 } };
  });
  assert.equal(calls.length, 1);
  assert.equal(out.kind === 'ok' && out.value.truncated, false);
});

class Host implements IRequestHost {
  current = new FakeChannel();
  emits = 0;
  channel(): FakeChannel {
    return this.current;
  }
  mainBusy(): boolean {
    return false;
  }
  flooding(): boolean {
    return false;
  }
  answered(): void {}
  absorbs(): boolean {
    return false;
  }
  emit(): void {
    this.emits += 1;
  }
}

async function answerNames(host: Host, reads: KernelReads, names: string[]): Promise<void> {
  const done = reads.readNames();
  await settle();
  host.current.answer({ names: names.map(name => ({ name, type: 'int' })), next: null, truncated: false, total: names.length, elapsed_ms: 2 });
  await done;
}

test('the same names keep the table; a changed namespace bumps its version', async () => {
  const host = new Host();
  const reads = new KernelReads(new RequestPath(host), () => host.emit());
  await answerNames(host, reads, ['a', 'b']);
  const first = reads.namesVersion;
  assert.deepEqual(reads.names.map(n => n.name), ['a', 'b']);
  assert.equal(reads.namesTotal, 2);
  await answerNames(host, reads, ['a', 'b']);
  assert.equal(reads.namesVersion, first);
  await answerNames(host, reads, ['a', 'b', 'c']);
  assert.equal(reads.namesVersion, first + 1);
  reads.clear();
  assert.deepEqual([reads.names, reads.namesTotal, reads.calls], [[], null, []]);
});

test('a failed read says why; the last list stays', async () => {
  const host = new Host();
  const reads = new KernelReads(new RequestPath(host), () => host.emit());
  await answerNames(host, reads, ['a']);
  const done = reads.readNames();
  await settle();
  host.current.fail(new RequestError('failed', 'probe broke'));
  await done;
  assert.equal(reads.namesError, 'names failed (failed): probe broke');
  assert.deepEqual(reads.names.map(n => n.name), ['a']);
});

test('the persisted session fills the gauge, timeline, call tree and snapshots; the live names replace them', async () => {
  const host = new Host();
  const reads = new KernelReads(new RequestPath(host), () => host.emit());
  assert.equal(reads.applyPersisted({ exists: false }), false);
  const applied = reads.applyPersisted({
    exists: true,
    status: { session: 's', tokens: 10, window: 100, conversation: true },
    compactions: [{ id: 'c1', reason: 'manual', summary: 'x' }],
    calls: [{ session: 's', parent: null, depth: 0, entries: 3 }, { session: 's/k', parent: 's', name: 'kid', depth: 1, entries: 2 }],
    snapshots: [{ generation: 4, names: [{ name: 'df', type: 'DataFrame', kind: 'data', bytes: 10 }], bytes: 10 }, { names: [] }]
  });
  assert.equal(applied, true);
  assert.equal(reads.fromLog, true);
  assert.equal(reads.status?.window, 100);
  assert.deepEqual(reads.compactions.map(c => c.id), ['c1']);
  assert.deepEqual(reads.calls.map(c => [c.session, c.name, c.depth]), [['s', null, 0], ['s/k', 'kid', 1]]);
  assert.deepEqual(reads.persistedSnapshots.map(s => [s.generation, s.names.map(n => n.type)]), [[4, ['DataFrame']]]);
  await answerNames(host, reads, ['df']);
  assert.deepEqual(reads.persistedSnapshots, []);
});

test('each status the kernel answers reaches onStatus with its cell', async () => {
  const host = new Host();
  const seen: (ICellState | null)[] = [];
  const reads = new KernelReads(new RequestPath(host), () => host.emit(), status => seen.push(status.cell));
  for (const cell of [{ running: 'm2', finished: ['m1'] }, { running: null, finished: ['m1', 'm2'] }, 'junk']) {
    const done = reads.readStatus();
    await settle();
    host.current.answer({ session: 's', tokens: 1, cell });
    await done;
  }
  assert.deepEqual(seen, [{ running: 'm2', finished: ['m1'] }, { running: null, finished: ['m1', 'm2'] }, null]);
});

test('a cell has ended only when the kernel lists it as ended and runs nothing', () => {
  const cases: [string | null, unknown, boolean][] = [
    ['m2', { running: null, finished: ['m1', 'm2'] }, true],
    ['m2', { running: 'm3', finished: ['m1', 'm2'] }, false], // a queued cell runs now
    ['m2', { running: 'm2', finished: ['m1'] }, false],
    ['m2', { running: null, finished: ['m1'] }, false], // the hook has not seen it start yet
    [null, { running: null, finished: ['m1'] }, false], // which cell started is not known
    ['m2', undefined, false], // an older kernel sends no cell
    ['m2', { running: 7, finished: ['m2'] }, false],
    ['m2', { running: null, finished: 'm2' }, false]
  ];
  for (const [started, cell, ended] of cases) {
    assert.equal(cellHasEnded(started, parseCell(cell)), ended, JSON.stringify([started, cell]));
  }
});
