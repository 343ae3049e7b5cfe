/** The poll while a cell runs and the back-off while an output flood drops replies. */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { RequestError } from '../src/errors';
import { BUSY_POLL_MS, MAX_POLL_MS, Poller } from '../src/poller';
import { ManualClock } from './fakes';

function make(): { poller: Poller; clock: ManualClock; state: { busy: boolean; can: boolean; rounds: boolean[]; floods: number } } {
  const clock = new ManualClock();
  const state = { busy: true, can: true, rounds: [] as boolean[], floods: 0 };
  const poller = new Poller(
    {
      canPoll: () => state.can,
      mainBusy: () => state.busy,
      onRound: cellEnded => state.rounds.push(cellEnded),
      onFloodChanged: () => {
        state.floods += 1;
      }
    },
    clock
  );
  return { poller, clock, state };
}

const timeout = new RequestError('timeout', 'names got no answer within 5 s');

test('while a cell runs one round follows another every BUSY_POLL_MS, one timer at a time', () => {
  const { poller, clock, state } = make();
  poller.schedule();
  poller.schedule();
  assert.deepEqual(clock.pending(), [BUSY_POLL_MS]);
  clock.fire();
  clock.fire();
  assert.deepEqual(state.rounds, [false, false]);
  assert.deepEqual(clock.pending(), [BUSY_POLL_MS]);
  state.busy = false; // the cell ended, no flood: the poll stops by itself
  clock.fire();
  assert.deepEqual(state.rounds, [false, false]);
  assert.deepEqual(clock.pending(), []);
});

test('a lost reply while busy starts the flood back-off, doubling up to MAX_POLL_MS', () => {
  const { poller, clock, state } = make();
  assert.equal(poller.absorbs(timeout, true), true);
  assert.equal(poller.flooding, true);
  assert.equal(state.floods, 1);
  const waits: number[] = [];
  for (let i = 0; i < 6; i++) {
    waits.push(...clock.pending());
    clock.fire();
  }
  assert.deepEqual(waits, [2000, 4000, 8000, 16000, 16000, 16000]);
  assert.equal(poller.delayMs, MAX_POLL_MS);
  // The cell ended during the flood: the rounds go on (asking for everything) until a reply comes.
  state.busy = false;
  clock.fire();
  assert.equal(state.rounds[state.rounds.length - 1], true);
  assert.equal(poller.answered(), true);
  assert.equal(poller.flooding, false);
  assert.equal(poller.delayMs, BUSY_POLL_MS);
  assert.equal(state.floods, 2);
  assert.equal(poller.answered(), false);
});

test('only a timeout of a request sent while busy or flooding is the flood', () => {
  const { poller, state } = make();
  state.busy = false;
  assert.equal(poller.absorbs(timeout, false), false);
  assert.equal(poller.absorbs(new RequestError('failed', 'boom'), true), false);
  assert.equal(poller.absorbs(new Error('other'), true), false);
  assert.equal(poller.flooding, false);
  assert.equal(poller.absorbs(timeout, true), true);
  // Once flooding, a timeout counts even if it was sent when the cell had ended.
  assert.equal(poller.absorbs(timeout, false), true);
});

test('nothing is scheduled while polling is not possible, and reset forgets the back-off', () => {
  const { poller, clock, state } = make();
  state.can = false;
  poller.schedule();
  assert.deepEqual(clock.pending(), []);
  state.can = true;
  poller.absorbs(timeout, true);
  clock.fire();
  assert.equal(poller.delayMs, 4000);
  poller.reset();
  assert.deepEqual([poller.flooding, poller.delayMs, poller.scheduled], [false, BUSY_POLL_MS, false]);
  assert.deepEqual(clock.pending(), []);
});
