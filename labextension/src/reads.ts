/**
 * What the kernel (or, before it has loaded the extension, the session log)
 * last answered for one notebook: gauge figures, namespace, timeline, call
 * tree, persisted snapshots. Every figure is the kernel's; nothing is computed
 * here.
 *
 * Each read goes through the one request path (requests.ts) and a single
 * flight, so a slow kernel never piles up requests. The namespace is read in
 * pages (`names` with `after=` the previous page's `next`) until the last one,
 * so 100,000 names are all listed, in at most MAX_NAME_PAGES requests (one at
 * a time, on the subshell: a long read never queues requests behind it).
 *
 * What must hold: the table is rebuilt (`namesVersion`) only when the list of
 * names differs from the one before; a reply from a dropped channel changes
 * nothing; `clear()` forgets every answer of the kernel that is gone.
 */
import {
  ICallNode,
  ICompaction,
  INameInfo,
  IPersistedSnapshot,
  IStatus,
  isObject,
  Json,
  numberField,
  parseCalls,
  parseCompaction,
  parseNames,
  parsePersistedSnapshots,
  parseStatus,
  stringField
} from './protocol';
import { Outcome, RequestPath, SingleFlight } from './requests';

/** Names asked for per `names` request (a page of about 1 MB of JSON at most). */
export const NAMES_PAGE_LIMIT = 10000;

/**
 * The most pages one namespace read walks: a bound on the work, not a clock. A page ends at
 * NAMES_PAGE_LIMIT names or at the probe's time budget (0.2 s; a loaded machine lists ~3,000
 * names in it), so 100 pages hold 300,000 names or more.
 */
export const MAX_NAME_PAGES = 100;

/** How many compactions the timeline asks for. */
export const TIMELINE_LIMIT = 20;

/** All pages of the namespace, joined. */
export interface INamesRead {
  names: INameInfo[];
  total: number | null;
  /** Names follow that were not read (the page bound was reached). */
  truncated: boolean;
  elapsedMs: number;
  pages: number;
}

interface INamesPage {
  names: INameInfo[];
  next: string | null;
  truncated: boolean;
  total: number | null;
  elapsedMs: number;
}

function parseNamesPage(reply: Json): INamesPage {
  return {
    names: parseNames(reply),
    next: stringField(reply, 'next'),
    truncated: reply['truncated'] === true,
    total: numberField(reply, 'total'),
    elapsedMs: numberField(reply, 'elapsed_ms') ?? 0
  };
}

/**
 * Walk the namespace's pages with `ask` (one `names` request per page) and
 * join them. A failed page fails the read (nothing half-read is shown).
 */
export async function readAllNames(
  ask: (args: Json) => Promise<Outcome<INamesPage>>,
  pageLimit: number = NAMES_PAGE_LIMIT,
  maxPages: number = MAX_NAME_PAGES
): Promise<Outcome<INamesRead>> {
  const names: INameInfo[] = [];
  let after: string | null = null;
  let total: number | null = null;
  let elapsedMs = 0;
  for (let page = 1; page <= maxPages; page++) {
    const args: Json = after === null ? { limit: pageLimit } : { limit: pageLimit, after };
    const out = await ask(args);
    if (out.kind !== 'ok') {
      return out;
    }
    names.push(...out.value.names);
    total = out.value.total;
    elapsedMs += out.value.elapsedMs;
    // `next` says where the following page starts; an old kernel without it sent everything it had.
    const more = out.value.next !== null && out.value.truncated && out.value.names.length > 0;
    if (!more) {
      return { kind: 'ok', value: { names, total, truncated: out.value.truncated && out.value.next === null, elapsedMs, pages: page } };
    }
    after = out.value.next;
  }
  return { kind: 'ok', value: { names, total, truncated: true, elapsedMs, pages: maxPages } };
}

export class KernelReads {
  /** `onStatus`: every status the kernel answers (the connector learns from it that a cell ended). */
  constructor(path: RequestPath, emit: () => void, onStatus: (status: IStatus) => void = () => undefined) {
    this._path = path;
    this._emit = emit;
    this._onStatus = onStatus;
  }

  status: IStatus | null = null;
  /** `status` and `compactions` come from the session log (the server extension), not from the kernel. */
  fromLog = false;
  /** Why the last `status` request failed ('' when it did not). */
  statusError = '';
  names: INameInfo[] = [];
  /** All user names the kernel counted, or null. */
  namesTotal: number | null = null;
  /** Bumped only when the kernel's list differs from the one before (the table is rebuilt then). */
  namesVersion = 0;
  /** Not every name could be read (the page bound was reached). */
  namesTruncated = false;
  namesElapsedMs: number | null = null;
  /** Pages the last namespace read took. */
  namesPages = 0;
  /** When the namespace was last answered (browser clock), or null. */
  namesAt: Date | null = null;
  namesError = '';
  compactions: ICompaction[] = [];
  /** The call tree under the session (the root first), or empty when not known. */
  calls: ICallNode[] = [];
  /** Snapshots on disk, newest first, as the server read them (only while the kernel has no extension). */
  persistedSnapshots: IPersistedSnapshot[] = [];

  /** Re-read the namespace (all pages). */
  readNames(): Promise<void> {
    return this._namesFlight.run();
  }

  readStatus(): Promise<void> {
    return this._statusFlight.run();
  }

  readTimeline(): Promise<void> {
    return this._timelineFlight.run();
  }

  /** Everything at once (after a cell, a reconnect, an action). */
  async readAll(): Promise<void> {
    await Promise.all([this.readNames(), this.readStatus(), this.readTimeline()]);
  }

  /** Show what the session log holds (the server's persisted session) while the kernel has no extension. */
  applyPersisted(data: Json): boolean {
    if (data['exists'] !== true || !isObject(data['status'])) {
      return false;
    }
    this.status = parseStatus(data['status']);
    const list = Array.isArray(data['compactions']) ? data['compactions'] : [];
    this.compactions = list.map(parseCompaction).filter((c): c is ICompaction => c !== null);
    this.calls = parseCalls(data['calls']);
    this.persistedSnapshots = parsePersistedSnapshots(data['snapshots']);
    this.fromLog = true;
    return true;
  }

  clear(): void {
    this.status = null;
    this.fromLog = false;
    this.statusError = '';
    this.names = [];
    this._namesKey = '';
    this.namesVersion += 1;
    this.namesTotal = null;
    this.namesAt = null;
    this.namesElapsedMs = null;
    this.namesTruncated = false;
    this.namesPages = 0;
    this.namesError = '';
    this.compactions = [];
    this.calls = [];
    this.persistedSnapshots = [];
  }

  private async _readNames(): Promise<void> {
    const out = await readAllNames(args => this._path.ask('names', args, parseNamesPage, { floodAware: true }));
    if (out.kind === 'ok') {
      const read = out.value;
      // Rebuild the table only when the list changed; a poll that finds the same names keeps it.
      const key = JSON.stringify(read.names);
      if (key !== this._namesKey) {
        this._namesKey = key;
        this.names = read.names;
        this.namesVersion += 1;
      }
      this.namesTotal = read.total;
      this.namesTruncated = read.truncated;
      this.namesElapsedMs = read.elapsedMs;
      this.namesPages = read.pages;
      this.namesAt = new Date();
      this.namesError = '';
      this.persistedSnapshots = [];
    } else if (out.kind === 'failed' || (out.kind === 'not-sent' && out.reason === 'queued')) {
      this.namesError = out.text;
    } else if (out.kind === 'flood') {
      this.namesError = '';
    }
    this._emit();
  }

  private async _readStatus(): Promise<void> {
    await this._path.ask('status', {}, parseStatus, { floodAware: true }, out => {
      if (out.kind === 'ok') {
        this.status = out.value;
        this.fromLog = false;
        this.statusError = '';
        this._onStatus(out.value);
      } else if (out.kind === 'failed') {
        this.statusError = out.text;
      } else if (out.kind === 'flood') {
        this.statusError = '';
      }
    });
  }

  private async _readTimeline(): Promise<void> {
    const parseList = (reply: Json): ICompaction[] =>
      (Array.isArray(reply['compactions']) ? reply['compactions'] : [])
        .map(parseCompaction)
        .filter((c): c is ICompaction => c !== null);
    await this._path.ask('summaries', { limit: TIMELINE_LIMIT }, parseList, { floodAware: true }, out => {
      if (out.kind === 'ok') {
        this.compactions = out.value;
      } else if (out.kind === 'failed') {
        console.warn('ipython-compact: summaries failed', out.error);
      }
    });
    await this._path.ask('calls', {}, reply => parseCalls(reply['calls']), { floodAware: true }, out => {
      if (out.kind === 'ok') {
        this.calls = out.value;
      } else if (out.kind === 'failed') {
        this.calls = []; // a kernel of an older version has no `calls` op: no tree
      }
    });
  }

  private _path: RequestPath;
  private _emit: () => void;
  private _onStatus: (status: IStatus) => void;
  private _namesKey = '';
  private _namesFlight = new SingleFlight(() => this._readNames());
  private _statusFlight = new SingleFlight(() => this._readStatus());
  private _timelineFlight = new SingleFlight(() => this._readTimeline());
}
