/** The table view's reading of an `inspect` reply, and which names have a table. */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { hasTable } from '../src/names';
import { parseInspect } from '../src/protocol';
import { describeTable } from '../src/format';

test('an inspect reply is read cell by cell; ragged rows are padded', () => {
  const t = parseInspect({ name: 'xs', kind: 'rows', columns: ['0', '1'], index: ['0', '1'], rows: [['1', '2'], ['3']], shape: [2, 2], truncated: false });
  assert.deepEqual(t.rows, [
    ['1', '2'],
    ['3', '']
  ]);
  assert.deepEqual(t.shape, [2, 2]);
});

test('the note says what part of the value the grid holds', () => {
  const frame = parseInspect({ name: 'trips', kind: 'frame', columns: ['a'], index: ['0'], rows: [['1']], shape: [120, 30], truncated: false });
  assert.equal(describeTable(frame), 'frame of 120 rows × 30 columns; showing the first 1 row and the first 1 column.');
  const dict = parseInspect({ name: 'd', kind: 'dict', columns: ['value'], index: ['k'], rows: [['1']], shape: [1, 1], truncated: true });
  assert.equal(describeTable(dict), 'dict of 1 row (the kernel stopped at its time budget).');
});

test('only the exact classes inspect knows get a table button', () => {
  assert.equal(hasTable({ name: 'f', type: 'DataFrame', module: 'pandas' }), true);
  assert.equal(hasTable({ name: 'd', type: 'dict' }), true);
  assert.equal(hasTable({ name: 'o', type: 'OrderedDict', module: 'collections' }), false);
  assert.equal(hasTable({ name: 'd', type: 'dict', module: 'mylib' }), false);
  assert.equal(hasTable({ name: 't', type: 'toString' }), false);
  assert.equal(hasTable({ name: 'a', type: 'ndarray', module: 'numpy', shape: [] }), false);
});
