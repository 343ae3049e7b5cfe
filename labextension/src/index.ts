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
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { PanelModel } from './model';
import { CompactPanel, compactIcon, PANEL_ID } from './panel';

/** Command ids, namespaced by the plugin name. */
export const CommandIDs = {
  open: 'ipython-compact:open-panel',
  loadExtension: 'ipython-compact:load-extension',
  snapshot: 'ipython-compact:snapshot',
  restore: 'ipython-compact:restore'
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
    const panel = new CompactPanel(model);
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
      execute: () => model.current.snapshot()
    });
    app.commands.addCommand(CommandIDs.restore, {
      label: 'Restore the kernel namespace from the last snapshot (ipython-compact)',
      execute: () => model.current.restore()
    });
    for (const command of Object.values(CommandIDs)) {
      palette?.addItem({ command, category: 'Context compaction' });
    }
  }
};

export default plugin;
