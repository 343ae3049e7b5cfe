/**
 * The first rows of one name's value as a table, in the main area (opened by
 * clicking a frame's, array's, list's or dict's value in the namespace table).
 *
 * Why: a preview line says what a value starts with; a person looking at a
 * frame wants its head as a grid (jupyterlab-variableInspector opens one). The
 * kernel builds the grid (`inspect`: bounded rows, columns and time, no user
 * code); this view only lays it out, all text through `textContent`.
 *
 * What must hold: it shows the notebook it was opened for; Refresh asks again;
 * a failure (the name is gone, the kernel is busy without a subshell) is said
 * in words, never as an empty grid.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { NotebookModel } from './model';
import { describeTable } from './format';
import { IInspectReply } from './protocol';

export const TABLE_VIEW_CLASS = 'jp-IpythonCompact-tableView';

export class ValueTableView extends Widget {
  constructor(model: NotebookModel, name: string) {
    super();
    this._model = model;
    this._name = name;
    this.addClass(TABLE_VIEW_CLASS);
    this.node.dataset.notebook = model.notebookLabel;
    this.node.dataset.name = name;
    this.title.label = `${name} · ${model.notebookLabel.split('/').pop() || 'notebook'}`;
    this.title.caption = `The first rows of ${name} in ${model.notebookLabel}`;
    this.title.closable = true;
    const head = document.createElement('div');
    head.className = 'jp-IpythonCompact-wideHead';
    const title = document.createElement('h2');
    title.className = 'jp-IpythonCompact-title';
    title.textContent = name;
    const refresh = document.createElement('button');
    refresh.type = 'button';
    refresh.className = 'jp-IpythonCompact-button jp-mod-styled';
    refresh.dataset.action = 'refresh-table';
    refresh.textContent = 'Refresh';
    refresh.addEventListener('click', () => void this.load());
    head.append(title, refresh);
    this._note.className = 'jp-IpythonCompact-tableNote';
    this._grid.className = 'jp-IpythonCompact-tableGrid';
    this.node.append(head, this._note, this._grid);
  }

  get model(): NotebookModel {
    return this._model;
  }

  get name(): string {
    return this._name;
  }

  /** Ask the kernel for the table again and draw it (or say why not). */
  async load(): Promise<void> {
    this.node.dataset.state = 'loading';
    this._note.textContent = `Reading ${this._name}…`;
    const out = await this._model.inspect(this._name);
    if (this.isDisposed) {
      return;
    }
    this._grid.textContent = '';
    if (out.kind !== 'ok') {
      this.node.dataset.state = 'error';
      this._note.textContent =
        out.kind === 'failed' || out.kind === 'not-sent' ? out.text : 'No answer from the kernel; try Refresh.';
      return;
    }
    this.node.dataset.state = 'ready';
    this._note.textContent = describeTable(out.value);
    this._grid.appendChild(renderGrid(out.value));
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    void this.load();
  }

  private _model: NotebookModel;
  private _name: string;
  private _note = document.createElement('p');
  private _grid = document.createElement('div');
}

/** The grid: a header of column labels, a first column of row labels, the cells as the kernel wrote them. */
export function renderGrid(t: IInspectReply): HTMLTableElement {
  const table = document.createElement('table');
  table.className = 'jp-IpythonCompact-grid';
  const head = table.createTHead().insertRow();
  head.appendChild(document.createElement('th'));
  for (const label of t.columns) {
    const th = document.createElement('th');
    th.textContent = label;
    th.title = label;
    head.appendChild(th);
  }
  const body = table.createTBody();
  t.rows.forEach((cells, i) => {
    const row = body.insertRow();
    const label = document.createElement('th');
    label.scope = 'row';
    label.textContent = t.index[i] ?? String(i);
    row.appendChild(label);
    for (const text of cells) {
      const td = row.insertCell();
      td.textContent = text;
      if (text.length > 24) {
        td.title = text;
      }
    }
  });
  return table;
}
