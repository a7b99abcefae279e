// The single-page UI of the device: an auth gate (sign-in, or first-run setup while no key is
// set), a navigation bar and one page per capability, routed by the URL hash.

import { render } from 'preact';
import { useEffect, useLayoutEffect, useState } from 'preact/hooks';
import './style.css';
import { dropPrefetched, get, onUnauthorized, post, prefetch } from './api';
import * as live from './live';
import { DASHBOARD_READS, Dashboard } from './pages/dashboard';
import { KeyUnset, SignIn, Setup } from './pages/auth';

interface AuthStatus {
  required: boolean;
  configured: boolean;
  authenticated: boolean;
  method: string;
}

type PageFn = () => preact.JSX.Element;

// The dashboard comes with the first load; every other page is its own chunk, fetched when it
// is first opened, so the first load stays small.
const PAGES: [string, string, () => Promise<PageFn>][] = [
  ['dashboard', 'Dashboard', async () => Dashboard],
  ['config', 'Configuration', async () => (await import('./pages/config')).ConfigPage],
  ['wifi', 'WiFi', async () => (await import('./pages/wifi')).WifiPage],
  ['signalk', 'Signal K', async () => (await import('./pages/signalk')).SignalKPage],
  ['logs', 'Logs', async () => (await import('./pages/logs')).LogsPage],
  ['health', 'Health', async () => (await import('./pages/health')).HealthPage],
  ['updates', 'Updates', async () => (await import('./pages/updates')).UpdatesPage],
  ['plugins', 'Plugins', async () => (await import('./pages/plugins')).PluginsPage],
  ['system', 'System', async () => (await import('./pages/system')).SystemPage],
];

const loaded = new Map<string, PageFn>([['dashboard', Dashboard]]);

/** usePage is the component of a page, loading its chunk on first use. */
function usePage(id: string): PageFn | undefined | Error {
  const [, setN] = useState(0);
  const [err, setErr] = useState<Error>();
  const entry = PAGES.find((p) => p[0] === id) ?? PAGES[0];
  useEffect(() => {
    if (loaded.has(entry[0])) return;
    setErr(undefined);
    entry[2]().then(
      (c) => {
        loaded.set(entry[0], c);
        setN((n) => n + 1);
      },
      (e: unknown) => setErr(e instanceof Error ? e : new Error(String(e))),
    );
  }, [entry[0]]);
  return err ?? loaded.get(entry[0]);
}

function route(): string {
  const h = location.hash.replace(/^#\/?/, '').split('?')[0];
  return h || 'dashboard';
}

function useTheme(): [string, () => void] {
  const initial = localStorage.getItem('theme') || (matchMedia('(prefers-color-scheme: dark)').matches ? 'night' : 'day');
  const [t, setT] = useState(initial);
  useEffect(() => {
    document.documentElement.dataset.theme = t;
    localStorage.setItem('theme', t);
  }, [t]);
  return [t, () => setT(t === 'day' ? 'night' : 'day')];
}

// Asked before the first render, so the answer is on its way while the page is built; a load
// that opens on the dashboard asks for its documents at the same time (the loopback round
// trips overlap instead of following one another through renders and frames).
let firstStatus: Promise<AuthStatus> | undefined = get<AuthStatus>('/auth/status');
const firstReads = route() === 'dashboard' ? DASHBOARD_READS.map(prefetch) : [];

// The first render waits for these answers, up to FIRST_WAIT_MS: the page then opens on the
// dashboard (or sign-in, or setup) with its documents in one render and one frame, instead of
// a "Connecting" frame, then an empty dashboard, each rendered, laid out and painted while the
// answers wait on the main thread to be read; a device slower than that gets the notice
// meanwhile, and the documents as they come.
const FIRST_WAIT_MS = 150;
let firstAuth: AuthStatus | undefined;

function App() {
  const [auth, setAuth] = useState<AuthStatus | null>(firstAuth ?? null);
  const [err, setErr] = useState('');
  const [page, setPage] = useState(route());
  const [theme, toggleTheme] = useTheme();
  const [menu, setMenu] = useState(false);
  const linkState = live.useLink();
  const Page = usePage(page);

  const check = async () => {
    try {
      const pending = firstStatus ?? get<AuthStatus>('/auth/status');
      firstStatus = undefined;
      setAuth(await pending);
      setErr('');
    } catch {
      setErr('The device does not answer.');
      setTimeout(check, 3000);
    }
  };
  // Layout effects run in the render's own task: the status that is already on its way is
  // awaited, and the stream opened, without waiting for a frame first.
  useLayoutEffect(() => {
    void check();
    const onHash = () => {
      setPage(route());
      setMenu(false);
    };
    addEventListener('hashchange', onHash);
    // A 401 means the session may be gone: ask the device, and sign in again if it is.
    const off = onUnauthorized(() => void check());
    return () => {
      removeEventListener('hashchange', onHash);
      off();
    };
  }, []);

  const open = auth && (!auth.required || auth.authenticated);
  useLayoutEffect(() => {
    if (open) live.start(() => setAuth((a) => (a ? { ...a, authenticated: false } : a)));
    else live.stop();
  }, [open]);

  if (!auth)
    return (
      <main class="center">
        <p class={err ? 'error' : 'muted'}>{err || 'Connecting to the device…'}</p>
      </main>
    );
  const setup = page === 'setup' || (!auth.configured && !sessionStorage.getItem('setup-skipped') && page === 'dashboard');
  // The early reads were for a dashboard shown at once; one shown after sign-in or setup
  // reads its documents afresh.
  if (!open || setup) dropPrefetched();
  // A build that requires a key, with none set: the API refuses everything outside the
  // setup network, and a sign-in form would only loop (any key is answered auth_open).
  if (!open && !auth.configured) return <KeyUnset />;
  if (!open) return <SignIn onDone={check} />;
  if (setup)
    return (
      <Setup
        onDone={async () => {
          sessionStorage.setItem('setup-skipped', '1');
          location.hash = '#/dashboard';
          setPage('dashboard');
          await check();
        }}
      />
    );

  const signOut = async () => {
    live.stop();
    try {
      await post('/auth/logout');
    } finally {
      await check();
    }
  };
  return (
    <div class="shell">
      <header class="top">
        <button class="menu-btn" aria-expanded={menu} aria-controls="nav" onClick={() => setMenu(!menu)}>
          Menu
        </button>
        <strong class="brand">devhost</strong>
        <span class={`link l-${linkState}`} data-testid="link" title="Event stream">
          {linkState === 'live' ? 'live' : linkState === 'connecting' ? 'connecting…' : 'offline'}
        </span>
        <span class="grow" />
        <button onClick={toggleTheme} aria-label="Switch day or night colours">
          {theme === 'day' ? 'Night' : 'Day'}
        </button>
        {auth.configured && <button onClick={signOut}>Sign out</button>}
      </header>
      <nav id="nav" class={menu ? 'open' : ''} aria-label="Pages">
        {PAGES.map(([id, title]) => (
          <a key={id} href={`#/${id}`} aria-current={id === page ? 'page' : undefined}>
            {title}
          </a>
        ))}
      </nav>
      <main id="main">
        {Page instanceof Error ? (
          <p class="error" role="alert">
            This page could not be loaded: {Page.message}
          </p>
        ) : Page ? (
          <Page />
        ) : (
          <p class="muted">Loading…</p>
        )}
      </main>
    </div>
  );
}

void Promise.race([
  Promise.all([
    firstStatus.then(
      (s) => void (firstAuth = s),
      () => {}, // check() reports it
    ),
    ...firstReads,
  ]),
  new Promise((r) => setTimeout(r, FIRST_WAIT_MS)),
]).then(() => render(<App />, document.getElementById('app')!));
