/**
 * Render a compaction summary (Markdown-ish text written by a model or by the
 * offline summarizer) into DOM nodes.
 *
 * Why by hand: the summary can come from an untrusted notebook, so no string
 * from the data is ever parsed as HTML. Every piece of text is set with
 * `textContent`; only the element names are ours. The subset covers what the
 * checkpoint format uses: headings, bullet and numbered lists, fenced code,
 * paragraphs, `**bold**` and `` `code` `` spans.
 */
import { compactionFigures, formatTimestamp, formatTokens, plural } from './format';
import { ICompaction } from './protocol';

export { formatTimestamp, formatTokens, plural };

const HEADING = /^(#{1,6})\s+(.*)$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*\d+[.)]\s+(.*)$/;
// A checklist item ("- [x] done", "- [ ] open"): a box, not the brackets as text.
const TASK = /^\[( |x|X)\]\s+(.*)$/;
const FENCE = /^\s*(```|~~~)/;
const INLINE = /(\*\*[^*]+\*\*|`[^`]+`)/;
/** An externalized pointer's tail, `recall 1a2b3c4d`; the id must hold a digit (not "recall by id"). */
const POINTER = /\b(recall ([\w:-]*\d[\w:-]*|[0-9a-f]{8}\b))/;
/** A machine block's opening or closing line, `<ledger>` / `<anchors note="...">` / `</ledger>`. */
const BLOCK_OPEN = /^<([a-z][\w-]*)(\s[^>]*)?>$/;
const BLOCK_CLOSE = /^<\/([a-z][\w-]*)>$/;
/** The blocks the checkpoint format writes; any other tag-looking line stays plain text. */
const MACHINE_BLOCKS = new Set([
  'anchors',
  'ledger',
  'externalized',
  'ipython_state',
  'drift-guard',
  'read-files',
  'modified-files'
]);

/** Called with an entry id when a `recall <id>` pointer in a summary is clicked. */
export type RecallHandler = (entryId: string) => void;

/** Append plain text, turning `recall <id>` pointers into buttons when a handler is given. */
function appendText(parent: HTMLElement, text: string, onRecall?: RecallHandler): void {
  if (onRecall === undefined) {
    parent.appendChild(document.createTextNode(text));
    return;
  }
  let rest = text;
  for (let match = POINTER.exec(rest); match !== null; match = POINTER.exec(rest)) {
    if (match.index > 0) {
      parent.appendChild(document.createTextNode(rest.slice(0, match.index)));
    }
    const entryId = match[2];
    const link = document.createElement('button');
    link.type = 'button';
    link.className = 'jp-IpythonCompact-recallLink';
    link.dataset.entryId = entryId;
    link.textContent = match[1];
    link.title = `Show the original text of entry ${entryId}`;
    link.addEventListener('click', () => onRecall(entryId));
    parent.appendChild(link);
    rest = rest.slice(match.index + match[1].length);
  }
  if (rest !== '') {
    parent.appendChild(document.createTextNode(rest));
  }
}

/** Append `text` to `parent`, turning `**x**` into <strong> and `` `x` `` into <code>. */
export function appendInline(parent: HTMLElement, text: string, onRecall?: RecallHandler): void {
  for (const part of text.split(INLINE)) {
    if (part === '') {
      continue;
    }
    if (part.length > 4 && part.startsWith('**') && part.endsWith('**')) {
      const strong = document.createElement('strong');
      strong.textContent = part.slice(2, -2);
      parent.appendChild(strong);
    } else if (part.length > 2 && part.startsWith('`') && part.endsWith('`')) {
      const code = document.createElement('code');
      code.textContent = part.slice(1, -1);
      parent.appendChild(code);
    } else {
      appendText(parent, part, onRecall);
    }
  }
}

/** Build the DOM for a summary text. The returned element holds only our nodes. */
export function renderSummaryText(text: string, onRecall?: RecallHandler): HTMLElement {
  const root = document.createElement('div');
  root.className = 'jp-IpythonCompact-summary';
  let list: HTMLElement | null = null;
  let paragraph: HTMLElement | null = null;
  let fence: string[] | null = null;
  let block: { name: string; body: HTMLElement } | null = null;

  const closeBlocks = (): void => {
    list = null;
    paragraph = null;
  };

  for (const line of text.split(/\r?\n/)) {
    if (fence !== null) {
      if (FENCE.test(line)) {
        const pre = document.createElement('pre');
        pre.textContent = fence.join('\n');
        root.appendChild(pre);
        fence = null;
      } else {
        fence.push(line);
      }
      continue;
    }
    if (block !== null) {
      const close = BLOCK_CLOSE.exec(line.trim());
      if (close !== null && close[1] === block.name) {
        block = null;
      } else {
        const row = document.createElement('div');
        appendInline(row, line, onRecall);
        block.body.appendChild(row);
      }
      continue;
    }
    const open = BLOCK_OPEN.exec(line.trim());
    if (open !== null && MACHINE_BLOCKS.has(open[1])) {
      // <anchors>, <ledger>, <externalized>, <ipython_state>: machine blocks, shown as a labelled box.
      closeBlocks();
      const box = document.createElement('div');
      box.className = 'jp-IpythonCompact-block';
      box.dataset.block = open[1];
      const label = document.createElement('div');
      label.className = 'jp-IpythonCompact-blockLabel';
      label.textContent = open[1].replace(/[_-]/g, ' ');
      const body = document.createElement('div');
      body.className = 'jp-IpythonCompact-blockBody';
      box.append(label, body);
      root.appendChild(box);
      block = { name: open[1], body };
      continue;
    }
    if (FENCE.test(line)) {
      closeBlocks();
      fence = [];
      continue;
    }
    if (line.trim() === '') {
      closeBlocks();
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      closeBlocks();
      const level = Math.min(6, heading[1].length + 2);
      const h = document.createElement(`h${level}`);
      appendInline(h, heading[2], onRecall);
      root.appendChild(h);
      continue;
    }
    const bullet = BULLET.exec(line);
    const numbered = bullet ? null : NUMBERED.exec(line);
    const item = bullet ?? numbered;
    if (item) {
      paragraph = null;
      const tag = bullet ? 'UL' : 'OL';
      if (list === null || list.tagName !== tag) {
        list = document.createElement(tag.toLowerCase());
        root.appendChild(list);
      }
      const li = document.createElement('li');
      const task = bullet ? TASK.exec(item[1]) : null;
      if (task) {
        const done = task[1] !== ' ';
        li.className = 'jp-IpythonCompact-task';
        li.dataset.task = done ? 'done' : 'open';
        const box = document.createElement('span');
        box.className = 'jp-IpythonCompact-taskBox';
        box.textContent = done ? '\u2611' : '\u2610';
        box.setAttribute('aria-label', done ? 'done' : 'not done');
        li.appendChild(box);
        appendInline(li, task[2], onRecall);
      } else {
        appendInline(li, item[1], onRecall);
      }
      list.appendChild(li);
      continue;
    }
    list = null;
    if (paragraph === null) {
      paragraph = document.createElement('p');
      root.appendChild(paragraph);
    } else {
      paragraph.appendChild(document.createElement('br'));
    }
    appendInline(paragraph, line.trim(), onRecall);
  }
  if (fence !== null) {
    // An unclosed fence still shows its text rather than dropping it.
    const pre = document.createElement('pre');
    pre.textContent = fence.join('\n');
    root.appendChild(pre);
  }
  return root;
}

/** What a compaction kept verbatim, as the kernel reported it (a count or a list, and the head id). */
export function keptDescription(kept: unknown, firstKept: string | null): string {
  let count: number | null = null;
  if (typeof kept === 'number') {
    count = kept;
  } else if (Array.isArray(kept)) {
    count = kept.length;
  }
  const parts: string[] = [];
  if (firstKept) {
    parts.push(`kept verbatim from entry ${firstKept}`);
  }
  if (count !== null) {
    parts.push(`${count.toLocaleString('en-US')} kept ${count === 1 ? 'message' : 'messages'}`);
  }
  return parts.length ? parts.join(' · ') : 'nothing kept verbatim';
}

/**
 * One compaction as a card: reason, tokens before → after, what was kept and
 * the rendered summary. Used by the panel timeline (which passes `onRecall`, so
 * `recall <id>` pointers become buttons) and the mime renderer (plain text).
 */
export function renderCompactionCard(c: ICompaction, open: boolean, onRecall?: RecallHandler): HTMLElement {
  const card = document.createElement('div');
  card.className = 'jp-IpythonCompact-card';
  card.dataset.compactionId = c.id;

  const head = document.createElement('div');
  head.className = 'jp-IpythonCompact-cardHead';
  const reason = document.createElement('span');
  reason.className = 'jp-IpythonCompact-reason';
  reason.dataset.reason = c.reason;
  reason.textContent = c.reason;
  const tokens = document.createElement('span');
  tokens.className = 'jp-IpythonCompact-tokens';
  const figures = compactionFigures(c.tokens_before, c.tokens_after, c.context_after);
  tokens.textContent = figures.head;
  if (c.context_after !== null) {
    tokens.title =
      'The context right after this compaction, as the gauge counted it then ' +
      '(the checkpoint, the kept tail and the kernel-state notice placed after it)' +
      (c.estimate ? `, estimated by ${c.estimate}.` : '.');
  }
  const when = document.createElement('span');
  when.className = 'jp-IpythonCompact-when';
  when.textContent = formatTimestamp(c.timestamp);
  head.append(reason, tokens, when);

  const kept = document.createElement('div');
  kept.className = 'jp-IpythonCompact-kept';
  kept.textContent = [figures.own, keptDescription(c.kept_entries, c.first_kept_entry_id)]
    .filter(part => part !== null)
    .join(' · ');

  const details = document.createElement('details');
  details.open = open;
  const summaryLabel = document.createElement('summary');
  summaryLabel.textContent = 'Summary';
  details.append(summaryLabel, renderSummaryText(c.summary || '(empty summary)', onRecall));

  card.append(head);
  if (c.focus) {
    const focus = document.createElement('div');
    focus.className = 'jp-IpythonCompact-cardFocus';
    const label = document.createElement('span');
    label.className = 'jp-IpythonCompact-cardFocusLabel';
    label.textContent = 'focus: ';
    const text = document.createElement('span');
    text.className = 'jp-IpythonCompact-cardFocusText';
    text.textContent = c.focus;
    focus.append(label, text);
    card.appendChild(focus);
  }
  card.append(kept, details);
  if (c.notice) {
    const notice = document.createElement('details');
    notice.className = 'jp-IpythonCompact-notice';
    const label = document.createElement('summary');
    label.textContent = 'Kernel state notice';
    const pre = document.createElement('pre');
    pre.textContent = c.notice;
    notice.append(label, pre);
    card.appendChild(notice);
  }
  return card;
}
