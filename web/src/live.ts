// One EventSource on GET /events for the whole app. The latest document of every event is
// kept (the device sends snapshots on connect), and pages subscribe to the names they show.
// A stream that the browser gives up on (a 401 after a reboot ended the session, or the device
// being away) is reopened after a pause, once /auth/status says the session still holds.

import { useEffect, useLayoutEffect, useState } from 'preact/hooks';
import { BASE, get } from './api';

export type LinkState = 'connecting' | 'live' | 'down';

const latest = new Map<string, unknown>();
const subs = new Map<string, Set<(d: unknown) => void>>();
const linkSubs = new Set<(s: LinkState) => void>();
let link: LinkState = 'connecting';
let es: EventSource | undefined;
let retry: ReturnType<typeof setTimeout> | undefined;
let opened = 0; // connections opened, so pages can tell a reconnect
let needLogin: () => void = () => {};

export const NAMES = ['net', 'wifi', 'wifi_scan', 'config', 'sk', 'sk_servers', 'sk_ws', 'sk_tls', 'logs', 'ota', 'ble', 'plugins'];

function setLink(s: LinkState) {
  link = s;
  linkSubs.forEach((fn) => fn(s));
}

function deliver(name: string, data: unknown) {
  latest.set(name, data);
  subs.get(name)?.forEach((fn) => fn(data));
}

/** start opens the stream; onLogin is called when the device no longer takes the session. */
export function start(onLogin: () => void) {
  needLogin = onLogin;
  stop();
  open();
}

export function stop() {
  clearTimeout(retry);
  es?.close();
  es = undefined;
}

function open() {
  setLink('connecting');
  const s = new EventSource(BASE + '/events');
  es = s;
  s.onopen = () => {
    opened++;
    setLink('live');
    // Pages read their documents when they mount; a reopened stream (after a reboot or a
    // network loss) is when they must read them again.
    if (opened > 1) deliver('_open', opened);
  };
  for (const name of NAMES) {
    s.addEventListener(name, (ev) => {
      try {
        deliver(name, JSON.parse((ev as MessageEvent).data));
      } catch {
        // a frame that is not JSON is not one of the device's documents: ignore it
      }
    });
  }
  s.onerror = () => {
    if (s.readyState !== EventSource.CLOSED) {
      setLink('connecting'); // the browser retries by itself (retry: 3000)
      return;
    }
    setLink('down');
    s.close();
    if (es !== s) return;
    retry = setTimeout(async () => {
      try {
        const st = await get<{ required: boolean; authenticated: boolean }>('/auth/status');
        if (st.required && !st.authenticated) {
          needLogin();
          return;
        }
      } catch {
        // the device is away (rebooting): try the stream again below
      }
      if (es === s) open();
    }, 1500);
  };
}

/** useEvent is the latest document of an event, updated live. */
export function useEvent<T>(name: string): T | undefined {
  const [v, setV] = useState<T | undefined>(latest.get(name) as T | undefined);
  // Subscribed in the render's own task: an event arriving before the next frame (a useEffect
  // runs after it) would otherwise be kept in latest but never shown.
  useLayoutEffect(() => onEvent(name, (d) => setV(d as T)), [name]);
  return v;
}

/** onEvent calls fn for every later event of the name. */
export function onEvent(name: string, fn: (d: unknown) => void): () => void {
  let set = subs.get(name);
  if (!set) subs.set(name, (set = new Set()));
  set.add(fn);
  return () => set.delete(fn);
}

export function useLink(): LinkState {
  const [s, setS] = useState(link);
  useEffect(() => {
    linkSubs.add(setS);
    setS(link);
    return () => linkSubs.delete(setS);
  }, []);
  return s;
}

/** useRefresh reloads a document now and whenever one of the named events arrives (and when
 * the stream reconnects), never on a timer. The first load starts as the component is
 * rendered (a layout effect), not a frame later. initial is shown until it answers (an early
 * read that has already arrived, see api.ts prefetched). */
export function useRefresh<T>(load: () => Promise<T>, names: string[], deps: unknown[] = [], initial?: T): [T | undefined, unknown, () => void] {
  const [v, setV] = useState<T | undefined>(initial);
  const [err, setErr] = useState<unknown>(undefined);
  const [n, setN] = useState(0);
  useLayoutEffect(() => {
    let alive = true;
    let busy = false;
    let again = false;
    const run = async () => {
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      try {
        const r = await load();
        if (alive) {
          setV(r);
          setErr(undefined);
        }
      } catch (e) {
        if (alive) setErr(e);
      }
      busy = false;
      if (again && alive) {
        again = false;
        void run();
      }
    };
    void run();
    const offs = [...names, '_open'].map((name) => onEvent(name, () => void run()));
    return () => {
      alive = false;
      offs.forEach((f) => f());
    };
  }, [n, ...deps]);
  return [v, err, () => setN((x) => x + 1)];
}
