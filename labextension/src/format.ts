/**
 * Numbers and times as the panel writes them (thousands separators, singular
 * for one). No DOM: the request path and its unit tests use them too.
 */

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

