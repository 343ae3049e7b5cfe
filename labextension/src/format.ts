/**
 * Numbers and times as the panel writes them (thousands separators, singular
 * for one). No DOM: the request path and its unit tests use them too.
 */
import { IInspectReply } from './protocol';

/** A count and its noun, singular for exactly one: "1 entry", "10,000 names". */
export function plural(n: number, one: string, many: string): string {
  return `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;
}

/** Thousands separators for token counts; `?` when the kernel gave none. */
export function formatTokens(n: number | null): string {
  return n === null ? '?' : Math.round(n).toLocaleString('en-US');
}

/** A kernel timestamp (ISO string or epoch seconds/ms) as local time, or the raw text. */
export function formatTimestamp(ts: string | number | null): string {
  if (ts === null) {
    return '';
  }
  const date =
    typeof ts === 'number' ? new Date(ts > 1e12 ? ts : ts * 1000) : new Date(ts);
  if (Number.isNaN(date.getTime())) {
    return String(ts);
  }
  return date.toLocaleString();
}

/** "300 rows × 4 columns; the first 50 rows shown": what the grid holds of the whole value. */
export function describeTable(t: IInspectReply): string {
  const [rows, cols] = t.shape;
  const shown = t.rows.length;
  const width = t.columns.length;
  const noun = plural;
  let text = `${t.kind} of ${noun(rows, 'row', 'rows')}`;
  if (t.kind === 'frame' || t.kind === 'array' || t.kind === 'records' || t.kind === 'rows') {
    text += ` × ${noun(cols, 'column', 'columns')}`;
  }
  const cut: string[] = [];
  if (shown < rows) {
    cut.push(`the first ${noun(shown, 'row', 'rows')}`);
  }
  if (width < cols) {
    cut.push(`the first ${noun(width, 'column', 'columns')}`);
  }
  if (cut.length > 0) {
    text += `; showing ${cut.join(' and ')}`;
  }
  if (t.truncated) {
    text += ' (the kernel stopped at its time budget)';
  }
  return `${text}.`;
}

/**
 * A compaction's figures as the cell that made it names them: the context right after it (what
 * the gauge counted then, the kernel-state notice placed after it included) and, when it differs,
 * the compaction's own estimate of its checkpoint and kept tail. One number for one thing: the
 * head never shows the own estimate as if it were the context.
 */
export function compactionFigures(
  before: number | null,
  ownAfter: number | null,
  contextAfter: number | null
): { head: string; own: string | null } {
  if (contextAfter === null) {
    return { head: `${formatTokens(before)} → ${formatTokens(ownAfter)} tokens`, own: null };
  }
  return {
    head: `${formatTokens(before)} → ${formatTokens(contextAfter)} tokens in context`,
    own:
      ownAfter !== null && Math.round(ownAfter) !== Math.round(contextAfter)
        ? `checkpoint and kept tail ${formatTokens(ownAfter)}`
        : null
  };
}
