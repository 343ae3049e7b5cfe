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
    parts.push(`${info.bytes_approx ? '~' : ''}${formatBytes(info.bytes)}`);
  }
  return parts.join(' · ');
}

/** Types whose value the kernel's `inspect` shows as a table, with the module the probe names for each. */
const TABLE_TYPES = new Map<string, string | undefined>([
  ['dict', undefined],
  ['list', undefined],
  ['tuple', undefined],
  ['set', undefined],
  ['frozenset', undefined],
  ['ndarray', 'numpy'],
  ['DataFrame', 'pandas'],
  ['Series', 'pandas']
]);

/** Whether the kernel can show this name's value as a table (its exact class is one `inspect` knows). */
export function hasTable(info: INameInfo): boolean {
  if (!TABLE_TYPES.has(info.type) || TABLE_TYPES.get(info.type) !== info.module) {
    return false;
  }
  return !(info.type === 'ndarray' && info.shape !== undefined && info.shape.length === 0);
}

/** A column the namespace table can be sorted by. */
export type NamesSortKey = 'name' | 'type' | 'size';

/** How the table is sorted: a column and a direction. */
export interface INamesSort {
  key: NamesSortKey;
  descending: boolean;
}

/** The size a row sorts by: bytes when known, else length, else -1 (unknown last when ascending). */
function sizeOf(info: INameInfo): number {
  return info.bytes ?? info.length ?? -1;
}

/** `names` in the order `sort` asks for (a copy; ties keep the name order). */
export function sortNames(names: INameInfo[], sort: INamesSort): INameInfo[] {
  const byName = (a: INameInfo, b: INameInfo): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  const compare: (a: INameInfo, b: INameInfo) => number =
    sort.key === 'name'
      ? byName
      : sort.key === 'type'
        ? (a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : byName(a, b))
        : (a, b) => sizeOf(a) - sizeOf(b) || byName(a, b);
  const sorted = [...names].sort(compare);
  return sort.descending ? sorted.reverse() : sorted;
}

/**
 * The table element for a list of names (an empty-state line when there are none).
 * With `onSort` the headers are buttons that sort by their column (again: the
 * other direction); `sort` marks the current one (`aria-sort`). A value's
 * preview (computed by the kernel without running user code) is in its own
 * column; with `onInspect`, the value of a frame, series, array, list, tuple,
 * dict or set is a button that opens its first rows as a table. The `wide`
 * table (the main-area view) writes types with their module, sizes with column
 * dtypes, and says why a value would not survive a restart. In the narrow side
 * panel each row is two lines (CSS): name and size, then type and value.
 */
export function renderNamesTable(
  names: INameInfo[],
  sort?: INamesSort,
  onSort?: (key: NamesSortKey) => void,
  wide = false,
  onInspect?: (name: string) => void
): HTMLElement {
  if (names.length === 0) {
    const empty = document.createElement('div');
    empty.className = 'jp-IpythonCompact-empty';
    empty.textContent = 'No user-defined names yet.';
    return empty;
  }
  const table = document.createElement('table');
  table.className = wide ? 'jp-IpythonCompact-names jp-mod-wide' : 'jp-IpythonCompact-names';
  const head = table.createTHead().insertRow();
  const columns: [string, NamesSortKey | null][] = [
    ['Name', 'name'],
    ['Type', 'type'],
    ['Size', 'size'],
    ['Value', null]
  ];
  if (wide) {
    columns.push(['After a restart', null]);
  }
  for (const [label, key] of columns) {
    const th = document.createElement('th');
    th.textContent = label;
    if (key !== null && onSort !== undefined) {
      th.dataset.sort = key;
      th.tabIndex = 0;
      th.className = 'jp-IpythonCompact-sortable';
      th.title = `Sort by ${label.toLowerCase()}`;
      if (sort?.key === key) {
        th.setAttribute('aria-sort', sort.descending ? 'descending' : 'ascending');
        th.textContent = `${label} ${sort.descending ? '▼' : '▲'}`;
      }
      th.addEventListener('click', () => onSort(key));
      th.addEventListener('keydown', event => {
        if (event.key === 'Enter' || event.key === ' ') {
          event.preventDefault();
          onSort(key);
        }
      });
    }
    head.appendChild(th);
  }
  const body = table.createTBody();
  for (const info of names) {
    const row = body.insertRow();
    row.dataset.name = info.name;
    const name = row.insertCell();
    name.className = 'jp-IpythonCompact-name';
    name.textContent = info.name;
    name.title = info.name; // the value has its own cell (and tooltip) now
    const type = row.insertCell();
    type.className = 'jp-IpythonCompact-type';
    const qualified = info.module ? `${info.module}.${info.type}` : info.type;
    if (wide) {
      type.textContent = qualified; // the wide view has room: never wrapped, never cut
    } else {
      appendBreakable(type, info.type);
      if (info.dtype !== undefined) {
        // Shown after the type in the two-line layout, where the size line has no room for it.
        type.appendChild(Object.assign(document.createElement('span'), { className: 'jp-IpythonCompact-typeDtype', textContent: ` ${info.dtype}` }));
      }
    }
    type.title = info.dtype === undefined ? qualified : `${qualified} · ${info.dtype}`;
    const size = row.insertCell();
    size.className = 'jp-IpythonCompact-size';
    // Short parts stay whole; a narrow panel wraps between "(3, 4)", "float64" and "96 B".
    const parts = describeSize(info).split(' · ').filter(p => p !== '');
    parts.forEach((part, i) => {
      if (i > 0) {
        size.appendChild(Object.assign(document.createElement('span'), { className: 'jp-IpythonCompact-sizeSep', textContent: ' · ' }));
      }
      const span = document.createElement('span');
      if (part.length <= 24) {
        span.className = 'jp-IpythonCompact-sizePart';
      }
      if (part === info.dtype) {
        span.classList.add('jp-IpythonCompact-sizeDtype');
      }
      span.textContent = part;
      size.appendChild(span);
    });
    size.title = describeSize(info);
    if (wide && info.dtypes !== undefined) {
      size.appendChild(document.createTextNode(` · ${info.dtypes}`));
    }
    const value = row.insertCell();
    value.className = 'jp-IpythonCompact-value';
    value.textContent = info.preview ?? '';
    value.title = info.preview ?? '';
    if (onInspect !== undefined && hasTable(info)) {
      value.classList.add('jp-mod-inspectable');
      value.dataset.action = 'inspect';
      value.tabIndex = 0;
      value.setAttribute('role', 'button');
      value.title = `${info.preview ?? info.name}\nClick to see the first rows of ${info.name} as a table`;
      if (!info.preview) {
        value.textContent = 'show table';
      }
      value.addEventListener('click', () => onInspect(info.name));
      value.addEventListener('keydown', event => {
        if (event.key === 'Enter' || event.key === ' ') {
          event.preventDefault();
          onInspect(info.name);
        }
      });
    }
    if (wide) {
      const restart = row.insertCell();
      restart.className = 'jp-IpythonCompact-restart';
      restart.textContent = info.restart ?? '';
    }
  }
  return table;
}

/**
 * Append `text`, letting a narrow column wrap it only between its words: after a
 * dot and before a capital ("Ordered·Dict", "pathlib.·PosixPath"), never inside
 * one ("generato/r"). The text content stays exactly `text`.
 */
export function appendBreakable(parent: HTMLElement, text: string): void {
  const parts = text.split(/(?<=\.)|(?<=[a-z0-9_])(?=[A-Z])/);
  parts.forEach((part, i) => {
    if (i > 0) {
      parent.appendChild(document.createElement('wbr'));
    }
    parent.appendChild(document.createTextNode(part));
  });
}
