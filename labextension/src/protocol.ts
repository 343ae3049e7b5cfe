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
  | 'inspect'
  | 'status'
  | 'summaries'
  | 'preview'
  | 'compact'
  | 'snapshot'
  | 'restore'
  | 'recall'
  | 'calls';

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

/*
 * The wire payloads, one interface per TypedDict in ipython_compact/core/comm_protocol.py
 * (`I<Name>` for `<Name>`, the same keys: tests/test_protocol.py compares them). Field
 * meanings are written there once. Fields the kernel may send as null are typed so; the
 * panel still checks each field it reads (parse* below), so a reply of an unexpected
 * shape gives a clear message instead of a broken view.
 */

/** An error reply's payload. */
export interface IErrorBody {
  code: string;
  message: string;
}

export interface IHelloReply {
  protocol: number;
  version: string;
  session: string;
  subshell: boolean;
  ops: string[];
}

/** One row of the `names` reply. */
export interface INameRow {
  name: string;
  type: string;
  kind?: string;
  module?: string;
  shape?: number[];
  dtype?: string;
  length?: number;
  bytes?: number;
  bytes_approx?: boolean;
  dtypes?: string;
  restart?: string;
  preview?: string;
}

/** The panel's name row is the wire's. */
export type INameInfo = INameRow;

export interface INamesReply {
  names: INameRow[];
  truncated: boolean;
  next: string | null;
  elapsed_ms: number;
  total: number;
}

/** `inspect`: the head of one name's value as a grid of cell texts. */
export interface IInspectReply {
  name: string;
  kind: string;
  columns: string[];
  index: string[];
  rows: string[][];
  shape: number[];
  truncated: boolean;
}

export interface IInFlight {
  task_id: string;
  reason: string;
  blocking: boolean;
  started_at: unknown;
}

export interface IFullVerification {
  generation: number;
  timestamp: string | null;
}

/** The user's cell on the main shell, as the kernel's hooks saw it (execute_request ids). */
export interface ICellState {
  running: string | null;
  finished: string[];
}

export interface IStatusSnapshot {
  generation: number | null;
  timestamp: string | null;
  names: number;
  skipped: unknown[];
  bytes: number | null;
  origin: string | null;
  provisional: boolean | null;
  verification: string | null;
  last_full_verification: IFullVerification | null;
}

export interface IStatusReply {
  session: string | null;
  binding: string | null;
  binding_key: string | null;
  snapshot_dir: string | null;
  restore_pending: boolean | null;
  snapshot_problem: string | null;
  last_snapshot_error: string | null;
  bookkeeping_pending: number | null;
  source: string | null;
  model: string | null;
  conversation: boolean | null;
  tokens: number | null;
  /** Which estimate counted `tokens` (the live agent's learned one, or `default (density)`). */
  estimate: string | null;
  window: number | null;
  blocking_line: number | null;
  background_line: number | null;
  problem: string | null;
  entries: number | null;
  compactions: number | null;
  in_flight: unknown;
  last_failure: unknown;
  snapshot: Json | null;
  cell: ICellState | null;
  version: string | null;
}

/** The `status` reply, reduced to what the gauge shows. */
export type IStatus = Pick<
  IStatusReply,
  | 'session'
  | 'conversation'
  | 'tokens'
  | 'estimate'
  | 'window'
  | 'blocking_line'
  | 'background_line'
  | 'entries'
  | 'compactions'
  | 'in_flight'
  | 'last_failure'
  | 'snapshot'
  | 'cell'
  | 'restore_pending'
  | 'source'
>;

/** One compaction as `summaries` returns it. */
export interface ICompactionSummary {
  id: string;
  timestamp: string | number | null;
  reason: string;
  tokens_before: number | null;
  /** The compaction's own estimate: its checkpoint and kept tail. */
  tokens_after: number | null;
  /** The context right after it as `status` counted it (with the kernel-state notice after it). */
  context_after: number | null;
  /** Which estimate counted `context_after`, in the words `%compact status` uses. */
  estimate: string | null;
  summary: string;
  first_kept_entry_id: string | null;
  kept_entries: unknown;
  focus: string | null;
}

/** One compaction as the timeline shows it: a summary plus the notice it appended, when sent. */
export interface ICompaction extends ICompactionSummary {
  /** The `<ipython_state>` notice appended after this compaction, when the kernel sent it. */
  notice: string | null;
}

export interface ISummariesReply {
  compactions: ICompactionSummary[];
}

export interface ILayerCount {
  entries: number;
  tokens: number;
}

export interface IPreviewReply {
  session: string;
  focus: string | null;
  tokens_before: number;
  first_kept_entry_id: string;
  is_split_turn: boolean;
  summarize: ILayerCount;
  turn_prefix: ILayerCount;
  keep: ILayerCount;
  encode: ILayerCount;
  externalize: unknown[];
  discard: unknown[];
  anchors: Json;
  previous_summary: boolean;
  text: string;
}

export interface ICompactionRecord {
  id: string;
  timestamp: string | number | null;
  reason: string | null;
  summary: string;
  first_kept_entry_id: string | null;
  tokens_before: number;
  /** The compaction's own estimate: its checkpoint and kept tail. */
  tokens_after: number;
  /** The context as `status` counts it once the compaction and its notice are in. */
  context_after: number;
  /** Which estimate counted `context_after` (as `status` names it). */
  estimate: string;
  kept_entries: number;
  summarizer: unknown;
}

export interface ICompactReply {
  compaction: ICompactionRecord;
  notice: string | null;
}

export interface ISkipped {
  name: string;
  reason: string;
}

export interface ISnapshotPayload {
  generation: number;
  saved: string[];
  unchanged: string[];
  skipped: ISkipped[];
  bytes: number;
  written_bytes: number;
  path: string;
  elapsed_ms: number;
  verified_bytes: number;
  verification: string;
  sampled: string[];
  last_full_verification: IFullVerification | null;
  manifest_digest: string;
}

export interface ISnapshotReply {
  snapshot: ISnapshotPayload;
}

export interface IRestoreReply {
  generation: number | null;
  restored: string[];
  failed: ISkipped[];
  quarantined: ISkipped[];
  refused: string[];
  warnings: string[];
  process: string | null;
  available: string[];
  kept: string[];
}

/** One `recall` hit: an original log entry, its text as the kernel extracted it. */
export interface IRecallHit {
  id: string;
  kind: string;
  role: string | null;
  text: string;
  timestamp: string | number | null;
}

export interface IRecallReply {
  hits: IRecallHit[];
}

/** One session of a call tree: the root, or a sub-agent a parent session started. */
export interface ICallNode {
  session: string;
  parent: string | null;
  name: string | null;
  depth: number;
  entries: number;
  created_at: string | null;
  last_timestamp: string | null;
}

export interface ICallsReply {
  root: string;
  calls: ICallNode[];
}

/** One snapshot generation on disk, as the server extension read it from its signed manifest. */
export interface IPersistedSnapshot {
  generation: number;
  timestamp: string | null;
  origin: string | null;
  names: INameRow[];
  bytes: number;
}

/** `GET /ipython-compact/session?path=NOTEBOOK`: what the log holds before the kernel loads the extension. */
export interface IPersistedSession {
  notebook: string;
  session: string;
  exists: boolean;
  status?: Json;
  compactions?: ICompactionSummary[];
  snapshots?: IPersistedSnapshot[];
  calls?: ICallNode[];
}

/** Parse an `inspect` reply: every cell a string, every row as long as `columns` (ragged rows padded). */
export function parseInspect(reply: Json): IInspectReply {
  const strings = (value: unknown): string[] => (Array.isArray(value) ? value.map(v => (typeof v === 'string' ? v : String(v))) : []);
  const columns = strings(reply['columns']);
  const rows = Array.isArray(reply['rows']) ? reply['rows'].map(r => strings(r)) : [];
  const shape = Array.isArray(reply['shape']) ? reply['shape'].filter((n): n is number => typeof n === 'number') : [];
  return {
    name: stringField(reply, 'name') ?? '?',
    kind: stringField(reply, 'kind') ?? '?',
    columns,
    index: strings(reply['index']),
    rows: rows.map(r => (r.length < columns.length ? [...r, ...new Array<string>(columns.length - r.length).fill('')] : r)),
    shape: shape.length === 2 ? shape : [rows.length, columns.length],
    truncated: reply['truncated'] === true
  };
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
  for (const key of ['kind', 'dtypes', 'restart'] as const) {
    const text = stringField(row, key);
    if (text !== null) {
      info[key] = text;
    }
  }
  if (row['bytes_approx'] === true) {
    info.bytes_approx = true;
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
    context_after: numberField(value, 'context_after'),
    estimate: stringField(value, 'estimate'),
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
    estimate: stringField(value, 'estimate'),
    window: numberField(value, 'window'),
    blocking_line: numberField(value, 'blocking_line'),
    background_line: numberField(value, 'background_line'),
    entries: numberField(value, 'entries'),
    compactions: numberField(value, 'compactions'),
    in_flight: value['in_flight'],
    last_failure: value['last_failure'],
    snapshot: isObject(snapshot) ? snapshot : null,
    cell: parseCell(value['cell']),
    restore_pending: typeof value['restore_pending'] === 'boolean' ? value['restore_pending'] : null,
    source: stringField(value, 'source')
  };
}

/**
 * Whether the cell started by execute_request `started` has ended, by the kernel's
 * own account: its id is among the ended ones and no cell runs now. False when
 * either side is unknown (an older kernel, a cell seen only from elsewhere).
 */
export function cellHasEnded(started: string | null, cell: ICellState | null): boolean {
  return started !== null && cell !== null && cell.running === null && cell.finished.includes(started);
}

/** The `cell` of a `status` reply; null when missing or malformed (an older kernel). */
export function parseCell(value: unknown): ICellState | null {
  if (!isObject(value)) {
    return null;
  }
  const running = value['running'];
  const finished = value['finished'];
  if (!(running === null || typeof running === 'string') || !Array.isArray(finished)) {
    return null;
  }
  return { running, finished: finished.filter((id): id is string => typeof id === 'string') };
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

/** Parse a call tree (the `calls` reply's `calls`, or the persisted session's); rows without a session are dropped. */
export function parseCalls(value: unknown): ICallNode[] {
  if (!Array.isArray(value)) {
    return [];
  }
  const nodes: ICallNode[] = [];
  for (const row of value) {
    if (!isObject(row)) {
      continue;
    }
    const session = stringField(row, 'session');
    if (session === null) {
      continue;
    }
    nodes.push({
      session,
      parent: stringField(row, 'parent'),
      name: stringField(row, 'name'),
      depth: numberField(row, 'depth') ?? 0,
      entries: numberField(row, 'entries') ?? 0,
      created_at: stringField(row, 'created_at'),
      last_timestamp: stringField(row, 'last_timestamp')
    });
  }
  return nodes;
}

/** Parse the persisted snapshots the server extension lists (newest first); malformed rows are dropped. */
export function parsePersistedSnapshots(value: unknown): IPersistedSnapshot[] {
  if (!Array.isArray(value)) {
    return [];
  }
  const out: IPersistedSnapshot[] = [];
  for (const row of value) {
    if (!isObject(row)) {
      continue;
    }
    const generation = numberField(row, 'generation');
    if (generation === null) {
      continue;
    }
    out.push({
      generation,
      timestamp: stringField(row, 'timestamp'),
      origin: stringField(row, 'origin'),
      names: parseNames(row['names']),
      bytes: numberField(row, 'bytes') ?? 0
    });
  }
  return out;
}
