/**
 * The namespace table: name, type, and shape or size, exactly as the kernel's
 * probe reported them (the probe decides what counts as a user name and never
 * runs user code; the panel only lays the facts out).
 */
import { INameInfo } from './protocol';

/** Bytes in a short human form (1.5 KiB, 3.0 MiB). */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** The "shape or size" cell: shape and dtype for arrays, length, then bytes. */
export function describeSize(info: INameInfo): string {
  const parts: string[] = [];
  if (info.shape !== undefined) {
    parts.push(`(${info.shape.join(', ')}${info.shape.length === 1 ? ',' : ''})`);
  }
  if (info.dtype !== undefined) {
    parts.push(info.dtype);
  }
  if (info.shape === undefined && info.length !== undefined) {
    parts.push(`len ${info.length}`);
  }
  if (info.bytes !== undefined) {
    parts.push(formatBytes(info.bytes));
  }
  return parts.join(' · ');
}

/** The table element for a list of names (an empty-state line when there are none). */
export function renderNamesTable(names: INameInfo[]): HTMLElement {
  if (names.length === 0) {
    const empty = document.createElement('div');
    empty.className = 'jp-IpythonCompact-empty';
    empty.textContent = 'No user-defined names yet.';
    return empty;
  }
  const table = document.createElement('table');
  table.className = 'jp-IpythonCompact-names';
  const head = table.createTHead().insertRow();
  for (const label of ['Name', 'Type', 'Size']) {
    const th = document.createElement('th');
    th.textContent = label;
    head.appendChild(th);
  }
  const body = table.createTBody();
  for (const info of names) {
    const row = body.insertRow();
    row.dataset.name = info.name;
    const name = row.insertCell();
    name.className = 'jp-IpythonCompact-name';
    name.textContent = info.name;
    name.title = info.name;
    const type = row.insertCell();
    type.className = 'jp-IpythonCompact-type';
    type.textContent = info.type;
    type.title = info.module ? `${info.module}.${info.type}` : info.type;
    const size = row.insertCell();
    size.className = 'jp-IpythonCompact-size';
    // Short parts stay whole; a narrow panel wraps between "(3, 4)", "float64" and "96 B".
    const parts = describeSize(info).split(' · ').filter(p => p !== '');
    parts.forEach((part, i) => {
      if (i > 0) {
        size.appendChild(document.createTextNode(' · '));
      }
      const span = document.createElement('span');
      if (part.length <= 24) {
        span.className = 'jp-IpythonCompact-sizePart';
      }
      span.textContent = part;
      size.appendChild(span);
    });
    size.title = describeSize(info);
  }
  return table;
}
