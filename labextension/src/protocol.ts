/**
 * The `ipython_compact` comm protocol (version 1), as written in docs/protocol.md.
 *
 * These are the shapes the panel reads. The kernel computes every figure; the
 * panel only checks that a reply has the shape it is about to display, so a
 * kernel that sends something unexpected produces a clear message instead of a
 * broken view.
 */

/** Comm target the kernel registers when the extension is loaded. */
export const COMM_TARGET = 'ipython_compact';

/** Protocol version this frontend speaks. */
export const PROTOCOL_VERSION = 1;

/** Mime type of one compaction (same object as `summaries[i]`). */
export const SUMMARY_MIME = 'application/vnd.ipython-compact.summary+json';

/** Mime type of a namespace listing (same object as the `names` reply). */
export const NAMESPACE_MIME = 'application/vnd.ipython-compact.namespace+json';

/** Ops the panel sends. */
export type Op =
  | 'hello'
  | 'names'
  | 'status'
  | 'summaries'
  | 'preview'
  | 'compact'
  | 'snapshot'
  | 'restore'
  | 'recall';

/** A JSON object as it arrives from the kernel, before any shape is trusted. */
export type Json = { [key: string]: unknown };

/** Narrow `unknown` to a plain JSON object. */
export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A number field, or `null` when absent or not a finite number. */
export function numberField(obj: Json, key: string): number | null {
  const v = obj[key];
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** A string field, or `null` when absent or not a string. */
export function stringField(obj: Json, key: string): string | null {
  const v = obj[key];
  return typeof v === 'string' ? v : null;
}

/** An error reply's payload. */
export interface IProtocolError {
  code: string;
  message: string;
}

/** One row of the `names` reply. */
export interface INameInfo {
  name: string;
  type: string;
  module?: string;
  shape?: number[];
  dtype?: string;
  length?: number;
  bytes?: number;
  kind?: string;
  /** repr of a builtin scalar or short text, when the probe gave one. */
  preview?: string;
}

/** One compaction as `summaries` and `compact` return it. */
export interface ICompaction {
  id: string;
  timestamp: string | number | null;
  reason: string;
  tokens_before: number | null;
  tokens_after: number | null;
  summary: string;
  first_kept_entry_id: string | null;
  kept_entries: unknown;
  /** The `<ipython_state>` notice appended after this compaction, when the kernel sent it. */
  notice: string | null;
  /** The focus text the compaction was asked for, or null when it had none. */
  focus: string | null;
}

/** The `status` reply, reduced to what the gauge shows. */
export interface IStatus {
  session: string | null;
  /** Whether the context holds any model conversation (false: a plain notebook, nothing to compact). */
  conversation: boolean | null;
  tokens: number | null;
  window: number | null;
  blocking_line: number | null;
  background_line: number | null;
  entries: number | null;
  compactions: number | null;
  in_flight: unknown;
  last_failure: unknown;
  snapshot: Json | null;
}

/** Parse one `names` row; `null` when the row has no usable name. */
export function parseName(row: unknown): INameInfo | null {
  if (!isObject(row)) {
    return null;
  }
  const name = stringField(row, 'name');
  if (name === null) {
    return null;
  }
  const info: INameInfo = { name, type: stringField(row, 'type') ?? '?' };
  const module = stringField(row, 'module');
  if (module !== null) {
    info.module = module;
  }
  const shape = row['shape'];
  if (Array.isArray(shape) && shape.every(d => typeof d === 'number')) {
    info.shape = shape as number[];
  }
  const dtype = stringField(row, 'dtype');
  if (dtype !== null) {
    info.dtype = dtype;
  }
  const preview = stringField(row, 'preview');
  if (preview !== null) {
    info.preview = preview;
  }
  const length = numberField(row, 'length');
  if (length !== null) {
    info.length = length;
  }
  const bytes = numberField(row, 'bytes');
  if (bytes !== null) {
    info.bytes = bytes;
  }
  const kind = stringField(row, 'kind');
  if (kind !== null) {
    info.kind = kind;
  }
  return info;
}

/** Parse a list of names (from a reply or from the namespace mime bundle). */
export function parseNames(value: unknown): INameInfo[] {
  const rows = isObject(value) ? value['names'] : value;
  if (!Array.isArray(rows)) {
    return [];
  }
  return rows.map(parseName).filter((n): n is INameInfo => n !== null);
}

/** Parse one compaction object; `null` when it is not an object. */
export function parseCompaction(value: unknown): ICompaction | null {
  if (!isObject(value)) {
    return null;
  }
  const ts = value['timestamp'];
  return {
    id: stringField(value, 'id') ?? '',
    timestamp: typeof ts === 'string' || typeof ts === 'number' ? ts : null,
    reason: stringField(value, 'reason') ?? 'unknown',
    tokens_before: numberField(value, 'tokens_before'),
    tokens_after: numberField(value, 'tokens_after'),
    summary: stringField(value, 'summary') ?? '',
    first_kept_entry_id: stringField(value, 'first_kept_entry_id'),
    kept_entries: value['kept_entries'],
    notice: stringField(value, 'notice'),
    focus: stringField(value, 'focus') || null
  };
}

/** Parse the `status` reply. */
export function parseStatus(value: Json): IStatus {
  const snapshot = value['snapshot'];
  return {
    session: stringField(value, 'session'),
    conversation: typeof value['conversation'] === 'boolean' ? value['conversation'] : null,
    tokens: numberField(value, 'tokens'),
    window: numberField(value, 'window'),
    blocking_line: numberField(value, 'blocking_line'),
    background_line: numberField(value, 'background_line'),
    entries: numberField(value, 'entries'),
    compactions: numberField(value, 'compactions'),
    in_flight: value['in_flight'],
    last_failure: value['last_failure'],
    snapshot: isObject(snapshot) ? snapshot : null
  };
}

/** One `recall` hit: an original log entry, its text as the kernel extracted it. */
export interface IRecallHit {
  id: string;
  kind: string;
  role: string | null;
  text: string;
  timestamp: string | number | null;
}

/** Parse the `recall` reply's hits; rows without an id are dropped. */
export function parseRecallHits(value: Json): IRecallHit[] {
  const rows = value['hits'];
  if (!Array.isArray(rows)) {
    return [];
  }
  const hits: IRecallHit[] = [];
  for (const row of rows) {
    if (!isObject(row)) {
      continue;
    }
    const id = stringField(row, 'id');
    if (id === null) {
      continue;
    }
    const ts = row['timestamp'];
    hits.push({
      id,
      kind: stringField(row, 'kind') ?? '',
      role: stringField(row, 'role'),
      text: stringField(row, 'text') ?? '',
      timestamp: typeof ts === 'string' || typeof ts === 'number' ? ts : null
    });
  }
  return hits;
}
