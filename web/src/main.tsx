// The single-page UI of the device: an auth gate (sign-in, or first-run setup while no key is
// set), a navigation bar and one page per capability, routed by the URL hash.

import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import './style.css';
import { get, onUnauthorized, post } from './api';
import * as live from './live';
import { Dashboard } from './pages/dashboard';
import { ConfigPage } from './pages/config';
import { WifiPage } from './pages/wifi';
import { SignalKPage } from './pages/signalk';
import { LogsPage } from './pages/logs';
import { HealthPage } from './pages/health';
import { UpdatesPage } from './pages/updates';
import { PluginsPage } from './pages/plugins';
import { SystemPage } from './pages/system';
import { SignIn, Setup } from './pages/auth';

interface AuthStatus {
  required: boolean;
  configured: boolean;
  authenticated: boolean;
  method: string;
}

const PAGES: [string, string, () => preact.JSX.Element][] = [
  ['dashboard', 'Dashboard', Dashboard],
  ['config', 'Configuration', ConfigPage],
  ['wifi', 'WiFi', WifiPage],
  ['signalk', 'Signal K', SignalKPage],
  ['logs', 'Logs', LogsPage],
  ['health', 'Health', HealthPage],
  ['updates', 'Updates', UpdatesPage],
  ['plugins', 'Plugins', PluginsPage],
  ['system', 'System', SystemPage],
];

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

// Asked before the first render, so the answer is on its way while the page is built.
let firstStatus: Promise<AuthStatus> | undefined = get<AuthStatus>('/auth/status');

function App() {
  const [auth, setAuth] = useState<AuthStatus | null>(null);
  const [err, setErr] = useState('');
  const [page, setPage] = useState(route());
  const [theme, toggleTheme] = useTheme();
  const [menu, setMenu] = useState(false);
  const linkState = live.useLink();

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
  useEffect(() => {
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
  useEffect(() => {
    if (open) live.start(() => setAuth((a) => (a ? { ...a, authenticated: false } : a)));
    else live.stop();
  }, [open]);

  if (!auth)
    return (
      <main class="center">
        <p class={err ? 'error' : 'muted'}>{err || 'Connecting to the device…'}</p>
      </main>
    );
  if (!open) return <SignIn onDone={check} />;
  if (page === 'setup' || (!auth.configured && !sessionStorage.getItem('setup-skipped') && page === 'dashboard'))
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

  const Page = (PAGES.find((p) => p[0] === page) ?? PAGES[0])[2];
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
        <Page />
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
