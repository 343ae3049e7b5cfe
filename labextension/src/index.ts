/**
 * The ipython-compact JupyterLab plugin: a right-side panel that follows the
 * notebook in focus and talks to its kernel over the `ipython_compact` comm.
 *
 * The mime renderers live in mime.ts (the package's `mimeExtension`).
 */
import {
  ILabShell,
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { NotebookModel, PanelModel, reportMoved } from './model';
import { CompactPanel, compactIcon, PANEL_ID } from './panel';
import { ValueTableView } from './table_view';
import { NamespaceWideView } from './wide_view';

/** Command ids, namespaced by the plugin name. */
export const CommandIDs = {
  open: 'ipython-compact:open-panel',
  loadExtension: 'ipython-compact:load-extension',
  snapshot: 'ipython-compact:snapshot',
  restore: 'ipython-compact:restore',
  openNamespace: 'ipython-compact:open-namespace'
} as const;

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'ipython-compact:plugin',
  description: 'Context gauge, live namespace and compaction timeline for the current notebook kernel.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILabShell, ILayoutRestorer, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    labShell: ILabShell | null,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null
  ): void => {
    const model = new PanelModel();
    // One wide namespace view per notebook; opening it again brings it to the front.
    const wideViews = new Map<NotebookModel, MainAreaWidget<NamespaceWideView>>();
    const openWide = (notebook: NotebookModel): void => {
      if (notebook.context === null) {
        return;
      }
      let widget = wideViews.get(notebook);
      if (widget === undefined || widget.isDisposed) {
        const content = new NamespaceWideView(notebook, openTable);
        const created = new MainAreaWidget({ content });
        created.id = `ipython-compact-namespace-${wideViews.size + 1}-${Date.now()}`;
        created.title.label = content.title.label;
        created.title.caption = content.title.caption;
        created.title.icon = compactIcon;
        created.disposed.connect(() => wideViews.delete(notebook));
        wideViews.set(notebook, created);
        app.shell.add(created, 'main', { mode: 'split-bottom' }); // full width: the point of the wide view
        widget = created;
      }
      app.shell.activateById(widget.id);
    };
    // One table view per notebook and name; opening it again brings it to the front and refreshes it.
    const tables = new Map<string, MainAreaWidget<ValueTableView>>();
    const tableIds = new Map<NotebookModel, string>();
    const openTable = (notebook: NotebookModel, name: string): void => {
      if (notebook.context === null) {
        return;
      }
      let owner = tableIds.get(notebook);
      if (owner === undefined) {
        owner = String(tableIds.size + 1);
        tableIds.set(notebook, owner);
      }
      const key = `${owner}\u0000${name}`;
      let widget = tables.get(key);
      if (widget === undefined || widget.isDisposed) {
        const content = new ValueTableView(notebook, name);
        const created = new MainAreaWidget({ content });
        created.id = `ipython-compact-table-${tables.size + 1}-${Date.now()}`;
        created.title.label = content.title.label;
        created.title.caption = content.title.caption;
        created.title.icon = compactIcon;
        created.disposed.connect(() => tables.delete(key));
        tables.set(key, created);
        app.shell.add(created, 'main', { mode: 'split-bottom' });
        widget = created;
      } else {
        void widget.content.load();
      }
      app.shell.activateById(widget.id);
    };
    const panel = new CompactPanel(model, openWide, openTable);
    app.shell.add(panel, 'right', { rank: 900 });
    restorer?.add(panel, PANEL_ID);

    const follow = (nb: NotebookPanel | null): void => {
      model.follow(nb ? nb.sessionContext : null, nb ? nb.context.path : '');
    };
    // A reload or a closed tab sends nothing on its own: close every comm while the socket is
    // still open, so the kernel drops it and gives its subshell back (kernel/comm_handler.py).
    // `beforeunload` comes first, while the socket surely still sends; `pagehide` catches the rest.
    window.addEventListener('beforeunload', () => model.releaseAll());
    window.addEventListener('pagehide', () => model.releaseAll());
    // A renamed, moved or saved-as notebook: the header shows the new path and the session follows it.
    const watchPath = (nb: NotebookPanel): void => {
      let known = nb.context.path;
      nb.context.pathChanged.connect((_, path) => {
        const before = known;
        known = path;
        model.pathChanged(nb.sessionContext, path);
        if (before !== path) {
          void reportMoved(before, path);
        }
      });
    };
    tracker.forEach(watchPath);
    tracker.widgetAdded.connect((_, nb) => watchPath(nb));
    tracker.currentChanged.connect((_, nb) => follow(nb));
    follow(tracker.currentWidget);
    // The tracker keeps its current notebook when focus moves to the panel itself,
    // so the panel keeps following the notebook the user last worked in.
    labShell?.currentChanged.connect(() => {
      if (tracker.currentWidget === null) {
        follow(null);
      }
    });

    app.commands.addCommand(CommandIDs.open, {
      label: 'Show the context compaction panel',
      icon: compactIcon,
      execute: () => app.shell.activateById(PANEL_ID)
    });
    app.commands.addCommand(CommandIDs.loadExtension, {
      label: 'Load ipython_compact in the current kernel',
      execute: () => model.current.loadExtension()
    });
    app.commands.addCommand(CommandIDs.snapshot, {
      label: 'Snapshot the kernel namespace (ipython-compact)',
      isEnabled: () => model.current.state === 'ready',
      execute: () => model.current.actions.snapshot()
    });
    app.commands.addCommand(CommandIDs.restore, {
      label: 'Restore the kernel namespace from the last snapshot (ipython-compact)',
      execute: () => model.current.actions.restore()
    });
    app.commands.addCommand(CommandIDs.openNamespace, {
      label: 'Show the kernel namespace in the main area (ipython-compact)',
      isEnabled: () => model.current.context !== null,
      execute: () => openWide(model.current)
    });
    for (const command of Object.values(CommandIDs)) {
      palette?.addItem({ command, category: 'Context compaction' });
    }
  }
};

export default plugin;
