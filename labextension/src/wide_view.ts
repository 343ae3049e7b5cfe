/**
 * The namespace of one notebook's kernel, wide, in the main area (opened from
 * the panel's ⤢ button or the command palette).
 *
 * Why: the side panel is narrow; long type names and sizes were cut or wrapped.
 * Here every column has room: the type with its module, the size with column
 * dtypes, the value preview, and why a value would not survive a restart. It
 * sorts and filters on its own (its own `NamesViewState`) and stays live while a
 * cell runs, because it keeps its notebook's model active while it is open.
 *
 * What must hold: it follows the notebook it was opened for (not whichever has
 * focus); closing it stops only its own interest in the kernel.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { NotebookModel } from './model';
import { NamespaceSection } from './namespace_view';
import { NamesViewState } from './view_state';

export const WIDE_VIEW_CLASS = 'jp-IpythonCompact-wide';

export class NamespaceWideView extends Widget {
  constructor(model: NotebookModel, openTable?: (model: NotebookModel, name: string) => void) {
    super();
    this._model = model;
    this._section = new NamespaceSection(true, openTable && (name => openTable(model, name)));
    this.addClass(WIDE_VIEW_CLASS);
    this.node.dataset.notebook = model.notebookLabel;
    this.title.label = `Namespace · ${model.notebookLabel.split('/').pop() || 'notebook'}`;
    this.title.caption = `The kernel namespace of ${model.notebookLabel}`;
    this.title.closable = true;
    const head = document.createElement('div');
    head.className = 'jp-IpythonCompact-wideHead';
    const title = document.createElement('h2');
    title.className = 'jp-IpythonCompact-title';
    title.textContent = `Namespace of ${model.notebookLabel}`;
    const refresh = document.createElement('button');
    refresh.type = 'button';
    refresh.className = 'jp-IpythonCompact-button jp-mod-styled';
    refresh.dataset.action = 'refresh-names';
    refresh.textContent = 'Refresh';
    refresh.addEventListener('click', () => void this._model.refreshNames());
    head.append(title, this._section.updated, refresh);
    this.node.append(head, this._section.node);
    model.changed.connect(this._render, this);
    this._render();
  }

  get model(): NotebookModel {
    return this._model;
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._model.changed.disconnect(this._render, this);
    this._model.setActive(false, 'wide');
    super.dispose();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this._model.setActive(true, 'wide');
  }

  private _render(): void {
    this.node.dataset.state = this._model.state;
    this.node.dataset.busy = String(this._model.mainBusy);
    this._section.render(this._model, this._state);
  }

  private _model: NotebookModel;
  private _state = new NamesViewState();
  private _section: NamespaceSection;
}
