/**
 * Mime renderers for the kernel's rich outputs: one compaction summary and a
 * namespace listing.
 *
 * Both are `safe: true`, so they stay active in untrusted notebooks; that is
 * only honest because nothing from the data is parsed as HTML (see
 * summary.ts). When the data has an unexpected shape the output says so
 * instead of rendering half a card.
 */
import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { NAMESPACE_MIME, parseCompaction, parseNames, SUMMARY_MIME } from './protocol';
import { renderCompactionCard } from './summary';
import { renderNamesTable } from './names';

/**
 * Renders one output of the mime type it was made for: the data is handed to
 * `render` (which parses it and builds the DOM with text nodes only).
 */
export class JsonOutputRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions, render: (data: unknown) => HTMLElement) {
    super();
    this._mimeType = options.mimeType;
    this._render = render;
    this.addClass('jp-IpythonCompact-output');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.node.replaceChildren(this._render(model.data[this._mimeType]));
    return Promise.resolve();
  }

  private _mimeType: string;
  private _render: (data: unknown) => HTMLElement;
}

/** One `application/vnd.ipython-compact.summary+json` output. */
function renderSummary(data: unknown): HTMLElement {
  const compaction = parseCompaction(data);
  return compaction === null
    ? problem('This compaction output is not an object; nothing to show.')
    : renderCompactionCard(compaction, true);
}

function problem(text: string): HTMLElement {
  const div = document.createElement('div');
  div.className = 'jp-IpythonCompact-problem';
  div.textContent = text;
  return div;
}

export const summaryRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [SUMMARY_MIME],
  createRenderer: options => new JsonOutputRenderer(options, renderSummary)
};

export const namespaceRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [NAMESPACE_MIME],
  createRenderer: options => new JsonOutputRenderer(options, data => renderNamesTable(parseNames(data)))
};

// Rank 10 puts these ahead of the standard HTML (50) and Markdown (60) renderers, so the
// kernel's fallbacks are used only where this extension is not installed.
const extensions: IRenderMime.IExtension[] = [
  {
    id: 'ipython-compact:summary-renderer',
    description: 'Renders ipython-compact compaction summaries.',
    rendererFactory: summaryRendererFactory,
    rank: 10,
    dataType: 'json'
  },
  {
    id: 'ipython-compact:namespace-renderer',
    description: 'Renders ipython-compact namespace listings.',
    rendererFactory: namespaceRendererFactory,
    rank: 10,
    dataType: 'json'
  }
];

export default extensions;
