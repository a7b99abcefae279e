// Plugins: the list (state, memory, calls, errors), install from a local bundle through the
// chunked upload with the capabilities shown for consent before anything is granted, start,
// stop, remove (with or without its configuration), and the publisher keys.

import { useState } from 'preact/hooks';
import { del, get, post, put } from '../api';
import { useEvent, useRefresh } from '../live';
import { Badge, Card, KV, Problem, bytes, useAction } from '../ui';

export interface Plugin {
  id: string;
  name: string;
  version: string;
  description?: string;
  state: string;
  asked: string[];
  granted: string[];
  kid: string;
  memory: number;
  calls: number;
  errors: number;
  denied: number;
  restarts: number;
  last_error: string | null;
  namespace: string | null;
  /** What wakes a dormant plugin (state "dormant"). */
  wake?: Wake;
}
/** A dormant plugin's wake conditions (ABI 1.4): settings of its own namespace and the values
 * it sleeps with (any other value wakes it), a press of the provisioning button, the WiFi
 * station left without a network. */
export interface Wake {
  config?: Record<string, unknown>;
  button?: boolean;
  wifi_unconfigured?: boolean;
}
export interface PluginList {
  plugins: Plugin[];
}
interface Upload {
  id: string;
  size: number;
  received: number;
  max_chunk: number;
  bundle?: { manifest: { id: string; name: string; version: string; description?: string; capabilities: string[]; routes?: { method: string; path: string }[] }; kid: string; sha256: string };
}

/** What each capability lets a plugin do, for the consent list. */
const CAPS: Record<string, string> = {
  config: 'keep its own settings (a configuration section)',
  'signalk.publish': 'publish values to the Signal K server',
  'signalk.subscribe': 'read values from the Signal K server',
  'signalk.put': 'answer Signal K PUT requests (be switched from the boat network)',
  'signalk.put.send': 'send Signal K PUT requests to other equipment',
  health: 'report health conditions',
  'health.reboot': 'report conditions that can restart the device',
  log: 'write to the device log',
  timer: 'run on a timer',
  'power.hold': 'keep the device awake',
  clock: 'read the wall clock',
  http: 'serve its own API endpoints',
  events: 'send live events',
  gpio: 'drive the board\'s GPIO pins',
  can: 'use the CAN bus (NMEA 2000)',
  ble: 'use the Bluetooth radio',
  mdns: 'advertise services on the local network (mDNS)',
  'power.sleep': 'put the device to sleep',
  'net.client': 'open network connections to any address the device can reach, and receive UDP on the device\'s addresses',
  'ble.peripheral': 'offer a Bluetooth service phones can connect to',
  portal: 'answer phones on the setup portal network without a key',
  'wifi.prov': 'set the WiFi network the device joins, scan for networks, keep the setup portal up',
  'prov.pop': 'read the device\'s provisioning proof of possession',
  button: 'react to the provisioning button',
};

function b64(chunk: Uint8Array): string {
  let s = '';
  for (let i = 0; i < chunk.length; i += 0x8000) s += String.fromCharCode(...chunk.subarray(i, i + 0x8000));
  return btoa(s);
}

function Install() {
  const [up, setUp] = useState<Upload>();
  const [grant, setGrant] = useState<Record<string, boolean>>({});
  const [progress, setProgress] = useState(0);
  const [run, busy, note] = useAction();
  const send = (file: File) =>
    run(async () => {
      const data = new Uint8Array(await file.arrayBuffer());
      let u = await post<Upload>('/plugins/uploads', { size: data.length });
      const step = u.max_chunk || 12000;
      for (let off = 0; off < data.length; off += step) {
        u = await put<Upload>(`/plugins/uploads/${u.id}`, { offset: off, data: b64(data.subarray(off, off + step)) });
        setProgress(Math.round((100 * Math.min(data.length, off + step)) / data.length));
      }
      // Verify the bundle and learn what it asks for; nothing is granted yet.
      u = await post<Upload>(`/plugins/uploads/${u.id}`);
      setUp(u);
      setGrant(Object.fromEntries((u.bundle?.manifest.capabilities ?? []).map((c) => [c, true])));
    });
  const cancel = () =>
    run(async () => {
      if (up) await del(`/plugins/uploads/${up.id}`);
      setUp(undefined);
      setProgress(0);
    });
  const install = () =>
    run(async () => {
      if (!up) return;
      const r = await post<{ id: string; granted: string[] }>('/plugins', { upload: up.id, grant: Object.keys(grant).filter((c) => grant[c]) });
      setUp(undefined);
      setProgress(0);
      return `Installed ${r.id}.`;
    });
  const m = up?.bundle?.manifest;
  return (
    <Card title="Install a plugin">
      {!m && (
        <label>
          Bundle file (.devplug)
          <input type="file" accept=".devplug,application/octet-stream" data-testid="bundle-file" disabled={busy} onChange={(e) => {
            const f = e.currentTarget.files?.[0];
            if (f) void send(f);
            e.currentTarget.value = '';
          }} />
        </label>
      )}
      {busy && !m && progress > 0 && (
        <div class="bar" role="progressbar" aria-valuenow={progress} aria-valuemin={0} aria-valuemax={100}>
          <span style={{ width: `${progress}%` }} />
        </div>
      )}
      {m && up?.bundle && (
        <div class="consent" role="dialog" aria-label="Plugin consent" data-testid="consent">
          <h3>
            {m.name} {m.version} <small class="muted">({m.id})</small>
          </h3>
          {m.description && <p>{m.description}</p>}
          <p class="muted">
            Signed by key <code>{up.bundle.kid}</code>; SHA-256 <code class="wrap">{up.bundle.sha256}</code>
          </p>
          <p>It asks to:</p>
          <ul class="caps">
            {m.capabilities.map((c) => (
              <li key={c}>
                <label>
                  <input type="checkbox" checked={!!grant[c]} onChange={(e) => setGrant({ ...grant, [c]: e.currentTarget.checked })} /> <code>{c}</code>: {CAPS[c] ?? 'a capability this page does not describe'}
                </label>
              </li>
            ))}
          </ul>
          {m.routes?.length ? <p class="muted">Endpoints: {m.routes.map((r) => `${r.method} ${r.path}`).join(', ')}</p> : null}
          <div class="row">
            <button class="primary" disabled={busy} onClick={install}>
              Grant the ticked and install
            </button>
            <button disabled={busy} onClick={cancel}>
              Cancel
            </button>
          </div>
        </div>
      )}
      {note}
    </Card>
  );
}

function Keys() {
  const [keys, err, reload] = useRefresh(() => get<{ keys: { kid: string; builtin: boolean; added_ms?: number; pem: string }[] }>('/plugins/keys'), []);
  const [pem, setPem] = useState('');
  const [run, busy, note] = useAction();
  return (
    <Card title="Publisher keys">
      {err ? <Problem err={err} /> : null}
      <ul class="conds">
        {keys?.keys.map((k) => (
          <li key={k.kid}>
            <code>{k.kid}</code> {k.builtin ? <Badge state="builtin">built in</Badge> : null}
            {!k.builtin && (
              <button disabled={busy} onClick={() => run(async () => (await del(`/plugins/keys/${encodeURIComponent(k.kid)}`), reload(), 'Key removed.'))}>
                Remove
              </button>
            )}
          </li>
        ))}
      </ul>
      <label>
        Add a publisher's public key (PEM)
        <textarea rows={3} value={pem} onInput={(e) => setPem(e.currentTarget.value)} />
      </label>
      <button disabled={busy || !pem} onClick={() => run(async () => (await post('/plugins/keys', { pem }), setPem(''), reload(), 'Key added.'))}>
        Add key
      </button>
      {note}
    </Card>
  );
}

/** wakeWords says in plain words what wakes a dormant plugin, one line per condition; a
 * request to its endpoints and Start always do. */
export function wakeWords(w: Wake | undefined, ns: string | null): string[] {
  const out: string[] = [];
  for (const [key, v] of Object.entries(w?.config ?? {})) {
    const name = ns ? `${ns}.${key}` : key;
    if (v === false) out.push(`the setting ${name} is switched on`);
    else if (v === true) out.push(`the setting ${name} is switched off`);
    else out.push(`the setting ${name} changes from ${JSON.stringify(v)}`);
  }
  if (w?.button) out.push('the provisioning button is pressed');
  if (w?.wifi_unconfigured) out.push('the device has no WiFi network configured');
  out.push(out.length ? 'a request to its endpoints, or Start' : 'a request to its endpoints, or Start (it named no condition)');
  return out;
}

function PluginCard(p: { pl: Plugin }) {
  const { pl } = p;
  const [run, busy, note] = useAction();
  const [purge, setPurge] = useState(false);
  const dormant = pl.state === 'dormant';
  return (
    <Card title={`${pl.name} ${pl.version}`}>
      <div data-testid={`plugin-${pl.id}`}>
        <KV
          rows={[
            ['Id', <code>{pl.id}</code>],
            ['State', dormant ? <Badge state="dormant">dormant: asleep until woken</Badge> : <Badge state={pl.state} />],
            ['Memory', dormant ? 'none while asleep (its code and memory are released)' : bytes(pl.memory)],
            [
              'Wakes when',
              dormant ? (
                <ul class="conds" data-testid={`wake-${pl.id}`}>
                  {wakeWords(pl.wake, pl.namespace).map((w) => (
                    <li key={w}>{w}</li>
                  ))}
                </ul>
              ) : undefined,
            ],
            ['Calls', pl.calls],
            ['Errors', pl.errors],
            ['Denied', pl.denied || undefined],
            ['Restarts', pl.restarts || undefined],
            ['Granted', pl.granted.join(', ')],
            ['Settings', pl.namespace ?? undefined],
            ['Last error', pl.last_error ?? undefined],
          ]}
        />
        <div class="row wrap">
          <button disabled={busy} onClick={() => run(async () => void (await post(`/plugins/${pl.id}/start`)))}>
            Start
          </button>
          <button disabled={busy} onClick={() => run(async () => void (await post(`/plugins/${pl.id}/stop`)))}>
            Stop
          </button>
          <label class="inline">
            <input type="checkbox" checked={purge} onChange={(e) => setPurge(e.currentTarget.checked)} /> with its settings
          </label>
          <button
            class="danger"
            disabled={busy}
            onClick={() => {
              if (confirm(`Remove ${pl.name}${purge ? ' and its settings' : ''}?`)) void run(async () => void (await del(`/plugins/${pl.id}${purge ? '?purge=true' : ''}`)));
            }}
          >
            Remove
          </button>
        </div>
        {note}
      </div>
    </Card>
  );
}

export function PluginsPage() {
  const ev = useEvent<PluginList>('plugins');
  const [list, err] = useRefresh(() => get<PluginList>('/plugins'), ['plugins']);
  const l = list ?? ev;
  if (err && !l) return <Problem err={err} what="a plugin host" />;
  return (
    <div class="grid">
      {l?.plugins.length === 0 && (
        <Card title="Installed">
          <p class="muted">No plugins installed.</p>
        </Card>
      )}
      {l?.plugins.map((pl) => <PluginCard key={pl.id} pl={pl} />)}
      <Install />
      <Keys />
    </div>
  );
}
