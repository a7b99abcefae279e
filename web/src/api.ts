// The device's REST API: JSON in and out, the login cookie sent by the browser itself, every
// error turned into ApiError. A 401 anywhere tells the app to show the sign-in page.

export const BASE = '/api/v1';

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    public body: Record<string, unknown>,
    public retryAfter = 0,
  ) {
    super(typeof body.message === 'string' && body.message ? `${code}: ${body.message}` : code || `HTTP ${status}`);
  }
}

type Listener = () => void;
const unauthorized = new Set<Listener>();
let holding = 0;
let missed = false;

function notifyUnauthorized() {
  if (holding > 0) missed = true;
  else unauthorized.forEach((fn) => fn());
}

/**
 * holdSession runs fn, which changes the key and signs in again: the device drops every
 * session when the key changes, so requests of other pages may meet a 401 in between. Those
 * are reported once fn is done, when the new session is in place to be checked.
 */
export async function holdSession<T>(fn: () => Promise<T>): Promise<T> {
  holding++;
  try {
    return await fn();
  } finally {
    holding--;
    if (holding === 0 && missed) {
      missed = false;
      unauthorized.forEach((f) => f());
    }
  }
}

/** onUnauthorized registers a callback for any 401 answer. */
export function onUnauthorized(fn: Listener): () => void {
  unauthorized.add(fn);
  return () => unauthorized.delete(fn);
}

export interface Opts {
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  raw?: boolean; // return the Response itself (after the status check)
  quiet?: boolean; // a 401 is the caller's own business: the sign-in check is not told
}

export async function call<T = unknown>(method: string, path: string, o: Opts = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json', ...o.headers };
  let body: string | undefined;
  if (method !== 'GET' && method !== 'HEAD') {
    // Every state-changing request carries the JSON content type, with or without a body.
    headers['Content-Type'] = 'application/json';
    if (o.body !== undefined) body = JSON.stringify(o.body);
  }
  const r = await fetch(BASE + path, { method, headers, body, credentials: 'same-origin', signal: o.signal, cache: 'no-store' });
  if (!r.ok) {
    let b: Record<string, unknown> = {};
    try {
      b = (await r.json()) as Record<string, unknown>;
    } catch {
      b = {};
    }
    const err = new ApiError(r.status, typeof b.error === 'string' ? b.error : '', b, Number(r.headers.get('Retry-After')) || 0);
    if (r.status === 401 && !o.quiet && !path.startsWith('/auth/')) notifyUnauthorized();
    throw err;
  }
  if (o.raw) return r as unknown as T;
  if (r.status === 204 || r.status === 304) return undefined as T;
  const text = await r.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

export const get = <T = unknown>(path: string, o?: Opts) => call<T>('GET', path, o);
export const post = <T = unknown>(path: string, body?: unknown) => call<T>('POST', path, { body });
export const put = <T = unknown>(path: string, body?: unknown) => call<T>('PUT', path, { body });
export const del = <T = unknown>(path: string) => call<T>('DELETE', path);

// Early reads: the documents of the page a load opens on, asked for as the script starts,
// beside /auth/status, instead of once the page has rendered and its effects have run (a
// frame or two later, ~100 ms on a busy machine). Without a session they answer 401, which is
// not reported: the app asks /auth/status itself, and the page then reads them again.
const early = new Map<string, Promise<unknown>>();
const arrived = new Map<string, unknown>();

/** prefetch starts GET path now, for the page that is about to be shown, and returns when it
 * is answered (or failed). */
export function prefetch(path: string): Promise<void> {
  const p = get(path, { quiet: true });
  early.set(path, p);
  return p.then(
    (doc) => {
      if (early.get(path) === p) arrived.set(path, doc);
    },
    () => {}, // a failed early read is asked again by getFirst
  );
}

/** dropPrefetched forgets the early reads: the page they were for was not the first shown,
 * and by the time it is they may be stale. */
export function dropPrefetched() {
  early.clear();
  arrived.clear();
}

/** prefetched is the early read of path if it has arrived and was not taken yet: the value a
 * page shows in its first render. */
export function prefetched<T = unknown>(path: string): T | undefined {
  return arrived.get(path) as T | undefined;
}

/** getFirst is GET path, answered the first time by its early read when there is one (asked
 * again if that failed). */
export function getFirst<T = unknown>(path: string): Promise<T> {
  const p = early.get(path);
  if (!p) return get<T>(path);
  early.delete(path);
  arrived.delete(path);
  return (p as Promise<T>).catch(() => get<T>(path));
}

/** missing says whether an error means the device has no such capability (404 not_found on
 * an API path): those pages say so instead of failing. */
export const missing = (e: unknown): boolean => e instanceof ApiError && e.status === 404;

export function message(e: unknown): string {
  if (e instanceof ApiError) {
    if (e.status === 429) return `Too many attempts: wait ${e.retryAfter || 30} s.`;
    return e.message;
  }
  return e instanceof Error ? e.message : String(e);
}
