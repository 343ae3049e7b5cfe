/**
 * How a request to the kernel side fails, and how the panel words it.
 *
 * Kept apart from the channel (which needs JupyterLab's kernel classes) so the
 * request path, the poller and their unit tests depend on nothing but this.
 */

/** A request failed: timed out, closed, or the kernel answered `ok: false`. */
export class RequestError extends Error {
  /** Protocol error code, or `timeout` / `closed` / `not_loaded` for channel failures. */
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.code = code;
    this.name = 'RequestError';
  }
}

/** The line the panel shows for a failed `what` (an op or an action's name). */
export function describeError(err: unknown, what: string): string {
  if (err instanceof RequestError && err.code === 'nothing_to_compact') {
    return `Not compacted: ${err.message}.`;
  }
  if (err instanceof RequestError) {
    return `${what} failed (${err.code}): ${err.message}`;
  }
  return `${what} failed: ${String(err)}`;
}
