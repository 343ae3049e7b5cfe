/**
 * The namespace table with its notes, count, filter and "show more": drawn in
 * the side panel (narrow) and in the wide view in the main area, each with its
 * own filter and sort (`NamesViewState`).
 *
 * Before the kernel has loaded the extension (after a restart), the names it
 * cannot list yet are shown from the newest snapshot on disk, as the server
 * extension read them from the signed manifest, so the user sees what a
 * restore would bring back.
 *
 * What must hold: the table element is rebuilt only when what it shows changed
 * (a poll that found the same names keeps it); all text goes in through
 * `textContent`.
 */
import { FLOOD_NOTE, NotebookModel } from './model';
import { NamesSortKey, renderNamesTable, sortNames } from './names';
import { formatTimestamp, plural } from './format';
import { INameInfo } from './protocol';
import { NAMES_PAGE, NamesViewState } from './view_state';

function el<K extends keyof HTMLElementTagNameMap>(tag: K, className: string, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.className = className;
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export class NamespaceSection {
  /** `onInspect`: open the table view of a name whose value has one (its Value cell is then a button). */
  constructor(wide: boolean, onInspect?: (name: string) => void) {
    this._wide = wide;
    this._onInspect = onInspect;
    this.filter.type = 'search';
    this.filter.placeholder = 'Filter names';
    this.filter.setAttribute('aria-label', 'Filter the namespace by name');
    this.filter.addEventListener('input', () => {
      if (this._state !== null) {
        this._state.setFilter(this.filter.value);
        this._redraw();
      }
    });
    this.more.type = 'button';
    this.more.dataset.action = 'more-names';
    this.more.addEventListener('click', () => {
      if (this._state !== null) {
        this._state.showMore();
        this._redraw();
      }
    });
    const countRow = el('div', 'jp-IpythonCompact-nsCountRow');
    countRow.append(this.count, this.filter);
    this.node.append(this.note, countRow, this.table, this.more, this.fromSnapshot);
    this.node.classList.toggle('jp-mod-wide', wide);
  }

  /** Everything below the section's head. */
  readonly node = el('div', 'jp-IpythonCompact-nsBody');
  /** "updated 12:00:01": the head shows it. */
  readonly updated = el('span', 'jp-IpythonCompact-updated');
  readonly note = el('div', 'jp-IpythonCompact-note');
  readonly count = el('span', 'jp-IpythonCompact-nsCount');
  readonly filter = el('input', 'jp-IpythonCompact-nsFilter jp-mod-styled');
  readonly table = el('div', 'jp-IpythonCompact-nsTable');
  readonly more = el('button', 'jp-IpythonCompact-linkButton jp-IpythonCompact-nsMore');
  /** The snapshot's names, while the kernel cannot list its own. */
  readonly fromSnapshot = el('div', 'jp-IpythonCompact-nsSnapshot');

  /** Draw `model`'s namespace with `state`'s filter, sort and page. */
  render(model: NotebookModel, state: NamesViewState): void {
    if (state !== this._state) {
      this.filter.value = state.filter;
    }
    this._model = model;
    this._state = state;
    this._redraw();
  }

  private _redraw(): void {
    const m = this._model;
    const state = this._state;
    if (m === null || state === null) {
      return;
    }
    const r = m.reads;
    if (r.namesAt !== null) {
      const ms = r.namesElapsedMs === null ? '' : `, probe took ${Math.round(r.namesElapsedMs)} ms`;
      const at = r.namesAt.toLocaleTimeString([], { hour12: false });
      this.updated.textContent = `updated ${at}`;
      this.updated.title = `The kernel answered at ${at}${ms}${r.namesPages > 1 ? ` in ${r.namesPages} pages` : ''}`;
      this.updated.dataset.updatedAt = String(r.namesAt.getTime());
    } else {
      this.updated.textContent = '';
      delete this.updated.dataset.updatedAt;
    }
    const notes: string[] = [];
    if (m.flooding) {
      notes.push(`${FLOOD_NOTE[0].toUpperCase()}${FLOOD_NOTE.slice(1)}.`);
    } else if (m.mainBusy && m.liveWhileBusy) {
      notes.push('A cell is running; live view over a subshell.');
    } else if (m.mainBusy && !r.namesError) {
      notes.push('Kernel busy.');
    }
    if (r.namesError) {
      notes.push(r.namesError);
    }
    const total = r.namesTotal ?? r.names.length;
    if (r.namesTruncated) {
      notes.push(`Not every name could be read: ${r.names.length.toLocaleString('en-US')} of ${plural(total, 'name', 'names')} listed.`);
    }
    this.note.textContent = notes.join(' ');
    this.note.hidden = notes.length === 0;
    this.note.dataset.busy = String(m.mainBusy);
    this.note.dataset.kind = m.flooding ? 'flooding' : r.namesError ? 'error' : 'note';
    this._renderSnapshot();

    const shown = m.state === 'ready' || r.names.length > 0;
    const filter = state.filter.trim().toLowerCase();
    // Rebuild only when what the table shows changed: a poll that found the same names keeps it.
    const key = `${r.namesVersion}\u0000${filter}\u0000${state.shown}\u0000${shown}\u0000${state.sort.key}${state.sort.descending}`;
    if (m === this._drawnFor && key === this._drawnKey) {
      return;
    }
    this._drawnFor = m;
    this._drawnKey = key;
    this.table.textContent = '';
    this.more.hidden = true;
    this.count.textContent = '';
    this.filter.hidden = !shown || r.names.length === 0;
    if (!shown) {
      return;
    }
    const matching: INameInfo[] = filter ? r.names.filter(n => n.name.toLowerCase().includes(filter)) : r.names;
    if (r.names.length > 0) {
      this.count.textContent = filter
        ? `${matching.length.toLocaleString('en-US')} of ${plural(total, 'name', 'names')} match`
        : plural(total, 'name', 'names');
    }
    this.count.dataset.total = String(total);
    this.count.dataset.matching = String(matching.length);
    if (filter && matching.length === 0) {
      this.table.appendChild(el('div', 'jp-IpythonCompact-empty', `No name contains “${state.filter.trim()}”.`));
      return;
    }
    const page = sortNames(matching, state.sort).slice(0, state.shown);
    const onSort = (column: NamesSortKey): void => {
      state.sortBy(column);
      this._redraw();
    };
    this.table.appendChild(renderNamesTable(page, state.sort, onSort, this._wide, this._onInspect));
    const rest = matching.length - page.length;
    if (rest > 0) {
      this.more.hidden = false;
      this.more.textContent = `Showing ${page.length.toLocaleString('en-US')} of ${matching.length.toLocaleString('en-US')} · show ${Math.min(NAMES_PAGE, rest).toLocaleString('en-US')} more`;
    }
  }

  /** The newest snapshot's names, while the kernel has not loaded the extension (after a restart). */
  private _renderSnapshot(): void {
    const m = this._model;
    const box = this.fromSnapshot;
    const newest = m === null || m.reads.names.length > 0 ? undefined : m.reads.persistedSnapshots[0];
    const key = newest === undefined ? '' : `${m?.notebookLabel}\u0000${newest.generation}\u0000${newest.names.length}`;
    if (key === this._snapshotKey) {
      return;
    }
    this._snapshotKey = key;
    box.textContent = '';
    box.hidden = newest === undefined;
    if (newest === undefined) {
      delete box.dataset.generation;
      return;
    }
    box.dataset.generation = String(newest.generation);
    const when = formatTimestamp(newest.timestamp);
    box.appendChild(
      el(
        'p',
        'jp-IpythonCompact-nsSnapshotNote',
        `Not in the kernel yet. The newest snapshot (generation ${newest.generation}${when ? `, ${when}` : ''}) ` +
          `holds ${plural(newest.names.length, 'name', 'names')}; Restore brings them back:`
      )
    );
    box.appendChild(renderNamesTable(newest.names, undefined, undefined, this._wide));
  }

  private _wide: boolean;
  private _onInspect: ((name: string) => void) | undefined;
  private _model: NotebookModel | null = null;
  private _state: NamesViewState | null = null;
  private _drawnFor: NotebookModel | null = null;
  private _drawnKey = '';
  private _snapshotKey = '\u0001';
}
