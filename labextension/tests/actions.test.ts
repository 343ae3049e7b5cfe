/** The panel's actions: one request path, and what the panel says of each reply. */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { describeCompact, describeRestore, describeSnapshot, IActionsHost, NotebookActions } from '../src/actions';
import { RequestError } from '../src/errors';
import { IRequestHost, RequestPath } from '../src/requests';
import { NamesViewState } from '../src/view_state';
import { sortNames } from '../src/names';
import { parseName } from '../src/protocol';
import { FakeChannel, settle } from './fakes';

test('each reply is said in one sentence, with thousands separators and singulars', () => {
  assert.equal(
    describeCompact({ compaction: { reason: 'manual', tokens_before: 12345, tokens_after: 2100 } }),
    'Compacted (manual): 12,345 → 2,100 tokens.'
  );
  assert.equal(describeCompact({}), 'Compaction finished.');
  // the context the gauge shows right after (notice included) leads; the compaction's own
  // estimate is named as what it is (issue 35: one number for one thing)
  assert.equal(
    describeCompact({
      compaction: { reason: 'manual', tokens_before: 38309, tokens_after: 2800, context_after: 2848 }
    }),
    'Compacted (manual): 38,309 → 2,848 tokens in context (checkpoint and kept tail 2,800).'
  );
  assert.equal(
    describeCompact({
      compaction: { reason: 'imported', tokens_before: 38309, tokens_after: 2848, context_after: 2848 }
    }),
    'Compacted (imported): 38,309 → 2,848 tokens in context.'
  );
  assert.equal(
    describeSnapshot({ snapshot: { generation: 3, saved: ['a'], skipped: [{ name: 'fh', reason: 'open file' }] } }),
    'Snapshot generation 3: saved 1 name; skipped fh (open file).'
  );
  const restored = describeRestore({
    restored: ['a', 'b'],
    kept: ['df'],
    failed: [{ name: 'x', reason: 'gone' }],
    quarantined: []
  });
  assert.deepEqual(restored, {
    text: 'Restored 2 names: a, b. Not overwritten (you defined them since): df. Could not load: x (gone).',
    kept: ['df']
  });
});

test('an empty restore says where it looked and what it found, not "Restored 0 names."', () => {
  const empty = describeRestore({
    restored: [],
    kept: [],
    failed: [],
    quarantined: [],
    warnings: ["restored nothing: looked in /d/snapshots/x for session 'notebook:/w/trip.ipynb'; sessions with snapshots there: notebook:/w/Untitled.ipynb"]
  });
  assert.equal(
    empty.text,
    "Nothing restored: looked in /d/snapshots/x for session 'notebook:/w/trip.ipynb'; sessions with snapshots there: notebook:/w/Untitled.ipynb"
  );
});

class Host implements IRequestHost, IActionsHost {
  current = new FakeChannel();
  emits = 0;
  refreshes = 0;
  connects: boolean[] = [];
  readonly path: RequestPath = new RequestPath(this);
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
  async ensureConnected(load: boolean): Promise<void> {
    this.connects.push(load);
  }
  async refresh(): Promise<void> {
    this.refreshes += 1;
  }
}

test('an action is pending until its reply, then says what happened and refreshes', async () => {
  const host = new Host();
  const actions = new NotebookActions(host);
  const done = actions.snapshot();
  await settle();
  assert.equal(actions.pending, 'snapshot');
  const sent = host.current.answer({ snapshot: { generation: 1, saved: ['a', 'b'], skipped: [] } });
  assert.equal(sent.timeoutMs, 30000);
  await done;
  assert.equal(actions.pending, '');
  assert.deepEqual(actions.lastAction, { action: 'snapshot', ok: true, text: 'Snapshot generation 1: saved 2 names.', reply: null });
  assert.equal(host.refreshes, 1);
  actions.cellStarted();
  assert.equal(actions.lastAction, null);
});

test('a restore loads the extension first and offers to take the kept names', async () => {
  const host = new Host();
  const actions = new NotebookActions(host);
  actions.restarted();
  assert.equal(actions.restartNoticed, true);
  const done = actions.restore();
  await settle();
  host.current.answer({ restored: ['a'], kept: ['df'] });
  await done;
  assert.deepEqual(host.connects, [true, false]);
  assert.equal(actions.restartNoticed, false);
  assert.deepEqual(actions.restoreKept, ['df']);
  const again = actions.overwriteKept();
  await settle();
  const sent = host.current.answer({ restored: ['df'], kept: [] });
  await again;
  assert.deepEqual(sent.args, { names: ['df'] });
  assert.deepEqual(actions.restoreKept, []);
});

test('a declined compaction is not a success, and is a note rather than an error (issue 35.6)', async () => {
  const host = new Host();
  const actions = new NotebookActions(host);
  const done = actions.compact('totals');
  await settle();
  const sent = host.current.fail(new RequestError('nothing_to_compact', 'nothing to summarize (0 tokens)'));
  await done;
  assert.deepEqual([sent.op, sent.args, sent.timeoutMs], ['compact', { focus: 'totals' }, 120000]);
  assert.deepEqual(actions.lastAction, {
    action: 'compact',
    ok: false,
    text: 'Not compacted: nothing to summarize (0 tokens).',
    reply: null,
    declined: true
  });
  const failing = actions.compact('');
  await settle();
  host.current.fail(new RequestError('failed', 'CompactionError: the model did not answer'));
  await failing;
  assert.equal(actions.lastAction?.declined, false);
});

test('recall tries a word as an entry id, then as a search', async () => {
  const host = new Host();
  const actions = new NotebookActions(host);
  const done = actions.recall('revenue');
  await settle();
  const byId = host.current.fail(new RequestError('failed', 'UnknownEntryError: revenue'));
  assert.deepEqual(byId.args, { entry_id: 'revenue', limit: 20 });
  await settle();
  const byQuery = host.current.answer({ hits: [{ id: 'e1', kind: 'message', role: 'user', text: 'revenue is up' }] });
  assert.deepEqual(byQuery.args, { query: 'revenue', limit: 20 });
  await done;
  assert.equal(actions.recallAsked, 'query “revenue”');
  assert.deepEqual(actions.recallHits.map(h => h.id), ['e1']);
  assert.equal(actions.recallError, '');
});

test('a clicked pointer whose entry is gone says so instead of searching', async () => {
  const host = new Host();
  const actions = new NotebookActions(host);
  const done = actions.recall('e-404', true);
  await settle();
  host.current.fail(new RequestError('failed', 'UnknownEntryError: e-404'));
  await done;
  assert.equal(host.current.sent.length, 0);
  assert.equal(actions.recallError, 'recall failed (failed): UnknownEntryError: e-404');
});

test('sorting by a column toggles its direction; sizes start largest first', () => {
  const state = new NamesViewState();
  const rows = [
    parseName({ name: 'b', type: 'int', bytes: 28 })!,
    parseName({ name: 'a', type: 'str', bytes: 90, bytes_approx: true, restart: 'x' })!,
    parseName({ name: 'c', type: 'list' })!
  ];
  assert.equal(rows[1].bytes_approx, true);
  assert.deepEqual(sortNames(rows, state.sort).map(r => r.name), ['a', 'b', 'c']);
  state.sortBy('size');
  assert.deepEqual(sortNames(rows, state.sort).map(r => r.name), ['a', 'b', 'c']);
  state.sortBy('size');
  assert.deepEqual(sortNames(rows, state.sort).map(r => r.name), ['c', 'b', 'a']);
  state.sortBy('type');
  assert.deepEqual(sortNames(rows, state.sort).map(r => r.name), ['b', 'c', 'a']);
  state.setFilter('x');
  state.showMore();
  assert.equal(state.shown, 400);
  state.setFilter('y');
  assert.equal(state.shown, 200);
});
