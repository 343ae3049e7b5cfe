/**
 * What the user asks of one notebook's kernel from the panel: compact,
 * preview, snapshot, restore (and take the kept names), recall; and what the
 * panel then says about it.
 *
 * Every action takes the one request path (requests.ts); the texts are built
 * by the pure `describe*` functions below (unit-tested), from the kernel's
 * reply alone.
 *
 * What must hold: one action at a time per notebook (`pending`); the last
 * action's message stays until the user dismisses it or runs a cell; a restore
 * never overwrites a name the user defined since without asking (`kept`).
 */
import { compactionFigures, plural } from './format';
import { IRecallHit, isObject, Json, numberField, Op, parseCompaction, parseRecallHits } from './protocol';
import { RequestError } from './errors';
import { RequestPath } from './requests';

/**
 * How long an action waits for its reply (ms): a preview, snapshot or restore
 * does more than a probe; a compaction may call a model.
 */
export const ACTION_TIMEOUT_MS = 30000;
export const COMPACT_TIMEOUT_MS = 120000;

/** The outcome of the last user action, shown under the action buttons. */
export interface IActionResult {
  action: string;
  ok: boolean;
  text: string;
  reply: Json | null;
  /** The kernel declined with its reason (nothing to compact): a note, not an error. */
  declined?: boolean;
}

/** A list's length or a number as-is (the kernel may send either). */
export function countOf(value: unknown): number {
  if (Array.isArray(value)) {
    return value.length;
  }
  return typeof value === 'number' ? value : 0;
}

/** `[{name, reason}, ...]` (as `skipped` and `failed` are sent) as "a (why), b (why)". */
export function namesWithReasons(items: unknown[]): string {
  return items.map(i => (isObject(i) ? `${String(i['name'])} (${String(i['reason'])})` : String(i))).join(', ');
}

export function describeCompact(reply: Json): string {
  const c = parseCompaction(reply['compaction']);
  if (c === null) {
    return 'Compaction finished.';
  }
  const figures = compactionFigures(c.tokens_before, c.tokens_after, c.context_after);
  return `Compacted (${c.reason}): ${figures.head}${figures.own ? ` (${figures.own})` : ''}.`;
}

export function describeSnapshot(reply: Json): string {
  const snap = reply['snapshot'];
  if (!isObject(snap)) {
    return 'Snapshot saved.';
  }
  const saved = countOf(snap['saved']);
  const skipped = Array.isArray(snap['skipped']) ? snap['skipped'] : [];
  const gen = numberField(snap, 'generation');
  return (
    `Snapshot${gen === null ? '' : ` generation ${gen}`}: saved ${plural(saved, 'name', 'names')}` +
    (skipped.length ? `; skipped ${namesWithReasons(skipped)}` : '') +
    '.'
  );
}

/** The restore report's sentence, and the names it kept (defined since with another value). */
export function describeRestore(reply: Json): { text: string; kept: string[] } {
  const restored = Array.isArray(reply['restored']) ? reply['restored'].map(String) : [];
  const failed = Array.isArray(reply['failed']) ? reply['failed'] : [];
  const quarantined = Array.isArray(reply['quarantined']) ? reply['quarantined'] : [];
  const kept = Array.isArray(reply['kept']) ? reply['kept'].map(String) : [];
  const warnings = Array.isArray(reply['warnings']) ? reply['warnings'].map(String) : [];
  let text = `Restored ${plural(restored.length, 'name', 'names')}`;
  text += restored.length ? `: ${restored.join(', ')}.` : '.';
  if (restored.length === 0 && kept.length === 0 && failed.length === 0 && warnings.length > 0) {
    // Where it looked and what it found there: an empty restore is never a bare "0 names".
    return { text: warnings.map(w => w.replace(/^restored nothing:\s*/, 'Nothing restored: ')).join(' '), kept };
  }
  if (kept.length) {
    text += ` Not overwritten (you defined them since): ${kept.join(', ')}.`;
  }
  if (failed.length) {
    text += ` Could not load: ${namesWithReasons(failed)}.`;
  }
  if (quarantined.length) {
    text += ` Not loaded: ${namesWithReasons(quarantined)}.`;
  }
  if (warnings.length) {
    text += ` ${warnings.join(' ')}`;
  }
  return { text, kept };
}

/** What the actions need of their notebook model. */
export interface IActionsHost {
  readonly path: RequestPath;
  /** Connect when not connected (loading the extension first when `load` and it is not loaded). */
  ensureConnected(load: boolean): Promise<void>;
  /** Re-read everything after an action. */
  refresh(): Promise<void>;
  emit(): void;
}

export class NotebookActions {
  constructor(host: IActionsHost) {
    this._host = host;
  }

  lastAction: IActionResult | null = null;
  /** The last `preview` reply, shown until the next action. */
  preview: Json | null = null;
  /** An action is in flight (buttons are disabled); '' when none. */
  pending = '';
  /** A restart was seen since the panel last connected; restore is offered. */
  restartNoticed = false;
  /** Names the last restore did not overwrite; the panel asks whether to take the snapshot's. */
  restoreKept: string[] = [];
  /** The last recall: what was asked, the hits, or why it failed. */
  recallAsked = '';
  recallHits: IRecallHit[] = [];
  recallError = '';
  recallPending = false;

  compact(focus: string): Promise<void> {
    return this._act('compact', focus ? { focus } : {}, describeCompact);
  }

  previewPlan(focus: string): Promise<void> {
    return this._act('preview', focus ? { focus } : {}, reply => {
      this.preview = reply;
      return 'Preview of the next compaction (nothing changed):';
    });
  }

  snapshot(): Promise<void> {
    return this._act('snapshot', {}, describeSnapshot);
  }

  /** Restore names from the newest snapshot, loading the extension first if needed. */
  async restore(): Promise<void> {
    await this._host.ensureConnected(true);
    await this._act('restore', {}, reply => this._restored(reply));
  }

  /** Take the snapshot's values for the names the last restore kept (the user said yes). */
  async overwriteKept(): Promise<void> {
    const names = this.restoreKept;
    if (names.length === 0) {
      return;
    }
    await this._act('restore', { names }, reply => this._restored(reply));
  }

  /** Leave the kept names as they are (the user said no). */
  keepMine(): void {
    this.restoreKept = [];
    this._host.emit();
  }

  dismiss(): void {
    this.lastAction = null;
    this.preview = null;
    this._host.emit();
  }

  /** The kernel says no snapshot waits to be restored: stop offering to restore one. */
  restoreSettled(): void {
    this.restartNoticed = false;
  }

  dismissRestart(): void {
    this.restartNoticed = false;
    this._host.emit();
  }

  /** A user cell started: the last message no longer describes the kernel. */
  cellStarted(): void {
    if (this.pending === '') {
      this.lastAction = null;
      this.preview = null;
    }
  }

  /** The kernel restarted: offer a restore; what was said about the old kernel is gone. */
  restarted(): void {
    this.restartNoticed = true;
    this.restoreKept = [];
    this.forget();
  }

  /** Forget what was said about a kernel that is gone. */
  forget(): void {
    this.preview = null;
    this.lastAction = null;
    this.recallAsked = '';
    this.recallHits = [];
    this.recallError = '';
  }

  clearRecall(): void {
    this.recallAsked = '';
    this.recallHits = [];
    this._host.emit();
  }

  /**
   * Recall original log text. A single word is tried as an entry id first (an
   * externalized pointer reads `recall 1a2b3c4d`); when no entry has that id,
   * or the text has spaces, it is a full-text query. The kernel decides what
   * matches; the panel only shows the hits.
   */
  async recall(text: string, asEntryId = false): Promise<void> {
    const wanted = text.trim();
    if (wanted === '') {
      this.recallAsked = '';
      this.recallHits = [];
      this.recallError = 'Type an entry id or words to search for.';
      this._host.emit();
      return;
    }
    await this._host.ensureConnected(false);
    this.recallPending = true;
    this.recallError = '';
    this._host.emit();
    const ask = (args: Json) =>
      this._host.path.ask('recall', args, parseRecallHits, { timeoutMs: ACTION_TIMEOUT_MS, evenWhenQueued: true });
    let asked = `query “${wanted}”`;
    let out = null;
    if (asEntryId || /^[\w.:-]+$/.test(wanted)) {
      const byId = await ask({ entry_id: wanted, limit: 20 });
      const unknownId =
        byId.kind === 'failed' && byId.error instanceof RequestError && byId.error.code === 'failed';
      if (byId.kind === 'ok' && (byId.value.length > 0 || asEntryId)) {
        out = byId;
        asked = `entry ${wanted}`;
      } else if (!(byId.kind === 'ok' || (unknownId && !asEntryId))) {
        out = byId; // a real failure (or an id the user clicked that is not there): say so
      }
    }
    if (out === null) {
      out = await ask({ query: wanted, limit: 20 });
    }
    this.recallPending = false;
    if (out.kind === 'ok') {
      this.recallAsked = asked;
      this.recallHits = out.value;
    } else if (out.kind !== 'stale') {
      this.recallAsked = wanted;
      this.recallHits = [];
      this.recallError = out.kind === 'failed' || out.kind === 'not-sent' ? out.text : 'recall failed: no answer';
    }
    this._host.emit();
  }

  private _restored(reply: Json): string {
    this.restartNoticed = false;
    const { text, kept } = describeRestore(reply);
    this.restoreKept = kept;
    return text;
  }

  private async _act(action: Op, args: Json, describe: (reply: Json) => string): Promise<void> {
    await this._host.ensureConnected(false);
    this.pending = action;
    this.preview = null;
    this._host.emit();
    const timeoutMs = action === 'compact' ? COMPACT_TIMEOUT_MS : ACTION_TIMEOUT_MS;
    const out = await this._host.path.ask(action, args, describe, { timeoutMs, evenWhenQueued: true });
    this.pending = '';
    if (out.kind === 'ok') {
      this.lastAction = { action, ok: true, text: out.value, reply: null };
    } else if (out.kind === 'failed' || out.kind === 'not-sent') {
      const declined = out.kind === 'failed' && out.error instanceof RequestError && out.error.code === 'nothing_to_compact';
      this.lastAction = { action, ok: false, text: out.text, reply: null, declined };
    }
    this._host.emit();
    if (out.kind === 'ok' || out.kind === 'failed') {
      await this._host.refresh();
    }
  }

  private _host: IActionsHost;
}
