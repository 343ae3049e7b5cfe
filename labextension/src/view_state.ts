/**
 * What a person set up in one view of a notebook's namespace and actions:
 * filter, sort, how many rows are drawn, the focus and recall text they typed.
 *
 * Kept per notebook (and per view: the panel and the wide view each have one),
 * so switching notebooks and back finds each as it was left.
 */
import { INamesSort, NamesSortKey } from './names';

/** Rows of the namespace table drawn at a time ("show more" adds as many again). */
export const NAMES_PAGE = 200;

export class NamesViewState {
  /** What the filter box holds. */
  filter = '';
  /** How the table is sorted (the user clicks a column header). */
  sort: INamesSort = { key: 'name', descending: false };
  /** How many matching rows the table draws. */
  shown = NAMES_PAGE;

  setFilter(text: string): void {
    this.filter = text;
    this.shown = NAMES_PAGE;
  }

  /** A header was clicked: that column, or the other direction of it (sizes start largest first). */
  sortBy(column: NamesSortKey): void {
    const same = this.sort.key === column;
    this.sort = { key: column, descending: same ? !this.sort.descending : column === 'size' };
  }

  showMore(): void {
    this.shown += NAMES_PAGE;
  }
}

export class NotebookViewState {
  /** The panel's namespace table. */
  names = new NamesViewState();
  /** What the user typed as focus text (kept across notebook switches). */
  focusText = '';
  /** What the recall box holds. */
  recallText = '';
}
