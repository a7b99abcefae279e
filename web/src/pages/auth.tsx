import { useEffect, useState } from 'preact/hooks';
import { ApiError, get, holdSession, message, missing, post, put } from '../api';
import { useEvent, useRefresh } from '../live';
import { Badge, Card, KV } from '../ui';
import { ScanList, reasonText, type WifiStatus } from './wifi';

export function SignIn(p: { onDone: () => void }) {
  const [key, setKey] = useState('');
  const [err, setErr] = useState('');
  const [wait, setWait] = useState(0);
  useEffect(() => {
    if (wait <= 0) return;
    const t = setTimeout(() => setWait(wait - 1), 1000);
    return () => clearTimeout(t);
  }, [wait]);
  const submit = async (e: Event) => {
    e.preventDefault();
    setErr('');
    try {
      await post('/auth/login', { key });
      setKey('');
      p.onDone();
    } catch (x) {
      if (x instanceof ApiError && x.status === 429) {
        setWait(x.retryAfter || 30);
        setErr('');
      } else if (x instanceof ApiError && x.status === 401) setErr('Wrong key.');
      else if (x instanceof ApiError && x.code === 'auth_open') p.onDone();
      else setErr(message(x));
    }
  };
  return (
    <main class="center">
      <form class="card narrow" onSubmit={submit} aria-label="Sign in">
        <h1>Sign in</h1>
        <p class="muted">This device is protected by an API key.</p>
        <label>
          API key
          <input type="password" name="key" autoComplete="current-password" value={key} onInput={(e) => setKey(e.currentTarget.value)} autoFocus />
        </label>
        {err && (
          <p class="error" role="alert">
            {err}
          </p>
        )}
        {wait > 0 && (
          <p class="error" role="alert" data-testid="throttle">
            Too many wrong keys: try again in {wait} s.
          </p>
        )}
        <button class="primary" type="submit" disabled={wait > 0 || key === ''}>
          Sign in
        </button>
      </form>
    </main>
  );
}

/**
 * KeyUnset is the page of a device built to require a key while none is set yet: its API
 * refuses everything here (403 auth_unconfigured), so there is nothing to sign in with. The key
 * is set from the device's setup network, whose portal is exempt.
 */
export function KeyUnset() {
  return (
    <main class="center">
      <section class="card narrow" aria-label="No API key set" data-testid="key-unset">
        <h1>No API key is set</h1>
        <p>This device requires an API key before it can be managed, and none is set yet.</p>
        <p>
          Set it from the device's setup network: join the device's own access point (named <code>dev-</code> and
          the device's id unless it was renamed), open this page there and follow the first-run setup.
        </p>
      </section>
    </main>
  );
}

/** Setup is the first-run page while no key is set: set a key, join WiFi. */
export function Setup(p: { onDone: () => void }) {
  const [key, setKey] = useState('');
  const [key2, setKey2] = useState('');
  const [keyNote, setKeyNote] = useState('');
  const [keyErr, setKeyErr] = useState('');
  const [ssid, setSsid] = useState('');
  const [psk, setPsk] = useState('');
  const [joining, setJoining] = useState('');
  const [wifiErr, setWifiErr] = useState('');
  // The station's state, live: after Join the page follows it to connected (or to the reason
  // it failed). A 404 means the device has no WiFi station.
  const wifiEv = useEvent<WifiStatus>('wifi');
  const [wifiSt, wifiGetErr] = useRefresh(() => get<WifiStatus>('/wifi/status'), ['wifi']);
  const wifi = wifiEv ?? wifiSt;
  const noWifi = !wifi && missing(wifiGetErr);

  const setApiKey = async (e: Event) => {
    e.preventDefault();
    setKeyErr('');
    if (key.length < 8 || key.length > 64) return setKeyErr('The key needs 8 to 64 characters.');
    if (key !== key2) return setKeyErr('The two keys differ.');
    try {
      await holdSession(async () => {
        await put('/config', { httpd: { api_key: key } });
        // The key is set: this browser signs in with it at once.
        await post('/auth/login', { key });
      });
      setKeyNote('Key set; this browser is signed in.');
      setKey('');
      setKey2('');
    } catch (x) {
      setKeyErr(message(x));
    }
  };
  const joinWifi = async (e: Event) => {
    e.preventDefault();
    setWifiErr('');
    if (ssid === '') return setWifiErr('Choose or type a network name.');
    if (psk !== '' && (psk.length < 8 || psk.length > 63)) return setWifiErr('A password has 8 to 63 characters (empty for an open network).');
    try {
      await put('/config', { wifi: { ssid0: ssid, psk0: psk, sta_enabled: true } });
      setJoining(ssid);
    } catch (x) {
      setWifiErr(message(x));
    }
  };
  return (
    <main class="setup">
      <h1>Set up this device</h1>
      <p>No API key is set: anyone on this network can manage the device. Set a key, then join a WiFi network.</p>
      <Card title="1. API key">
        <form onSubmit={setApiKey} aria-label="Set the API key">
          <label>
            New key (8 to 64 characters)
            <input type="password" name="new-key" autoComplete="new-password" value={key} onInput={(e) => setKey(e.currentTarget.value)} />
          </label>
          <label>
            The same key again
            <input type="password" name="new-key2" autoComplete="new-password" value={key2} onInput={(e) => setKey2(e.currentTarget.value)} />
          </label>
          {keyErr && <p class="error" role="alert">{keyErr}</p>}
          {keyNote && <p class="ok" role="status">{keyNote}</p>}
          <button class="primary" type="submit">
            Set key
          </button>
        </form>
      </Card>
      <Card title="2. WiFi">
        {noWifi && (
          <p class="lacks" data-testid="lacks">
            This device has no WiFi station (its endpoint answers 404); it uses its wired network.
          </p>
        )}
        {wifi && (
          <KV
            testid="setup-wifi"
            rows={[
              ['Station', <Badge state={wifi.state} />],
              ['Network', wifi.ssid],
              ['Address', wifi.ip],
              ['Last reason', wifi.state === 'connected' ? undefined : reasonText(wifi)],
            ]}
          />
        )}
        {wifi && <ScanList onPick={(s) => setSsid(s)} />}
        <form onSubmit={joinWifi} aria-label="Join WiFi">
          <label>
            Network name (SSID)
            <input name="ssid" value={ssid} maxLength={32} onInput={(e) => setSsid(e.currentTarget.value)} />
          </label>
          <label>
            Password
            <input type="password" name="psk" autoComplete="new-password" value={psk} onInput={(e) => setPsk(e.currentTarget.value)} />
          </label>
          {wifiErr && <p class="error" role="alert">{wifiErr}</p>}
          {joining && (
            <p class="ok" role="status">
              {wifi?.state === 'connected' && wifi.ssid === joining ? `Joined ${joining}.` : `Joining ${joining}.`}
            </p>
          )}
          <button type="submit">Join</button>
        </form>
      </Card>
      <button class="primary" onClick={p.onDone}>
        Continue to the dashboard
      </button>
    </main>
  );
}
