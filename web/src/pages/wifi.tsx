// WiFi: station status with the reason text, scan and pick a network into a slot, slot order,
// and the setup portal, live from the `wifi` and `wifi_scan` events. A 404 from /wifi/status
// means the device has no WiFi station and the page says so.

import { useEffect, useState } from 'preact/hooks';
import { ApiError, get, missing, post, put } from '../api';
import { useEvent, useRefresh } from '../live';
import { Badge, Card, KV, Loading, Problem, useAction } from '../ui';

export interface WifiStatus {
  state: string;
  sta_enabled?: boolean;
  network_index?: number;
  ssid?: string;
  bssid?: string;
  channel?: number;
  rssi?: number;
  ip?: string;
  gateway?: string;
  connected_s?: number;
  reason?: { code: number; text: string };
  backoff_ms?: number;
  attempt?: number;
  connect_count?: number;
  disconnect_count?: number;
  portal?: { active: boolean; ssid: string; ip?: string; clients?: number };
}

interface Scan {
  scanning: boolean;
  age_s: number | null;
  results: { ssid: string; bssid: string; rssi: number; channel: number; auth: string }[];
}

/** ScanList scans and lists the networks in range; onPick takes the chosen SSID. */
export function ScanList(p: { onPick: (ssid: string, bssid: string) => void }) {
  const ev = useEvent<Scan>('wifi_scan');
  const [scan, err] = useRefresh(() => get<Scan>('/wifi/scan'), ['wifi_scan']);
  const [run, busy, note] = useAction();
  const doc = ev ?? scan;
  if (err && missing(err)) return <Problem err={err} what="a WiFi scanner" />;
  return (
    <div class="scan">
      <button type="button" disabled={busy || doc?.scanning} onClick={() => run(startScan)}>
        {doc?.scanning ? 'Scanning…' : 'Scan'}
      </button>
      {doc?.age_s != null && <span class="muted"> results {doc.age_s} s old</span>}
      {note}
      <ul class="nets">
        {doc?.results.map((r) => (
          <li key={r.bssid}>
            <button type="button" onClick={() => p.onPick(r.ssid, r.bssid)}>
              {r.ssid || '(hidden)'}
            </button>{' '}
            <span class="muted">
              {r.rssi} dBm, ch {r.channel}, {r.auth}
            </span>
          </li>
        ))}
      </ul>
    </div>
  );
}

/** reasonText is the last disconnect reason as the spec words it, with its code. The device
 * keeps it after a reconnect, so the page labels it "last"; none before the first (code 0). */
export function reasonText(s: WifiStatus): string | undefined {
  if (!s.reason || (!s.reason.code && !s.reason.text)) return undefined;
  return `${s.reason.text || 'unknown reason'} (${s.reason.code})`;
}

async function startScan() {
  try {
    await post('/wifi/scan');
  } catch (e) {
    // 409 busy: the driver cannot scan now (for example while it is connecting).
    if (e instanceof ApiError && e.status === 409) throw new Error('The radio is busy and cannot scan now; try again in a moment.');
    throw e;
  }
}

type Slots = { ssid: string; psk: string; bssid: string; from: number }[];

export function WifiPage() {
  const ev = useEvent<WifiStatus>('wifi');
  const [st, err] = useRefresh(() => get<WifiStatus>('/wifi/status'), ['wifi']);
  const [cfg, , reload] = useRefresh(() => get<Record<string, Record<string, unknown>>>('/config?ns=wifi'), ['config']);
  const [slots, setSlots] = useState<Slots>([]);
  const [slot, setSlot] = useState(0);
  const [run, busy, note] = useAction();
  const w = cfg?.wifi;
  useEffect(() => {
    if (w) setSlots([0, 1, 2, 3].map((i) => ({ ssid: String(w[`ssid${i}`] ?? ''), psk: String(w[`psk${i}`] ?? ''), bssid: String(w[`bssid${i}`] ?? ''), from: i })));
  }, [cfg]);
  if (err && !ev) return missing(err) ? <Problem err={err} what="a WiFi station" /> : <Problem err={err} />;
  const s = ev ?? st;
  if (!s) return <Loading />;

  const move = (i: number, d: number) => {
    const j = i + d;
    if (j < 0 || j > 3) return;
    const n = [...slots];
    [n[i], n[j]] = [n[j], n[i]];
    setSlots(n);
  };
  const saveSlots = () =>
    run(async () => {
      const doc: Record<string, string> = {};
      // A stored password is never read back (the sentinel), so it cannot move with its slot:
      // a moved slot whose password is set must be retyped.
      const moved = slots.findIndex((x, i) => x.psk === '********' && x.from !== i);
      if (moved >= 0) throw new Error(`Retype the password of slot ${moved} (${slots[moved].ssid}): it moved.`);
      slots.forEach((x, i) => {
        doc[`ssid${i}`] = x.ssid;
        doc[`bssid${i}`] = x.bssid;
        if (x.psk !== '********') doc[`psk${i}`] = x.psk;
      });
      await put('/config', { wifi: doc });
      reload();
      return 'Networks saved.';
    });
  return (
    <div class="grid">
      <Card title="Station">
        <KV
          testid="wifi-status"
          rows={[
            ['State', <Badge state={s.state} />],
            ['Network', s.ssid ? `${s.ssid} (slot ${s.network_index ?? '?'})` : undefined],
            ['Signal', s.rssi != null ? `${s.rssi} dBm, channel ${s.channel ?? '?'}` : undefined],
            ['Address', s.ip],
            ['Last reason', reasonText(s)],
            ['Retry in', s.backoff_ms != null ? `${Math.round(s.backoff_ms / 1000)} s` : undefined],
            ['Connects / drops', `${s.connect_count ?? 0} / ${s.disconnect_count ?? 0}`],
          ]}
        />
      </Card>
      <Card title="Setup portal">
        <KV testid="portal" rows={[['Active', s.portal?.active ? 'yes' : 'no'], ['SSID', s.portal?.ssid], ['Address', s.portal?.ip], ['Clients', s.portal?.clients]]} />
        <p class="muted">The portal is the device's own access point for setup. Its settings are in Configuration, WiFi, "Setup network".</p>
      </Card>
      <Card title="Networks (slot order is priority)">
        <ol class="slots">
          {slots.map((x, i) => (
            <li key={i} class={i === slot ? 'sel' : ''}>
              <label>
                <input type="radio" name="slot" checked={i === slot} onChange={() => setSlot(i)} /> {x.ssid || <em class="muted">empty</em>}
                {x.bssid && <span class="muted"> pinned {x.bssid}</span>}
              </label>
              <span class="row">
                <button type="button" aria-label={`Move slot ${i} up`} onClick={() => move(i, -1)} disabled={i === 0}>
                  ↑
                </button>
                <button type="button" aria-label={`Move slot ${i} down`} onClick={() => move(i, 1)} disabled={i === 3}>
                  ↓
                </button>
                <button type="button" onClick={() => setSlots(slots.map((y, j) => (j === i ? { ssid: '', psk: '', bssid: '', from: i } : y)))}>
                  Clear
                </button>
              </span>
            </li>
          ))}
        </ol>
        <label>
          Password for slot {slot} (empty for an open network)
          <input
            type="password"
            autoComplete="new-password"
            placeholder={slots[slot]?.psk === '********' ? 'set (type to replace)' : ''}
            value={slots[slot]?.psk === '********' ? '' : slots[slot]?.psk}
            onInput={(e) => setSlots(slots.map((y, j) => (j === slot ? { ...y, psk: e.currentTarget.value, from: slot } : y)))}
          />
        </label>
        <button class="primary" disabled={busy} onClick={saveSlots}>
          Save networks
        </button>
        {note}
        <h3>Pick from a scan into slot {slot}</h3>
        <ScanList onPick={(ssid) => setSlots(slots.map((y, j) => (j === slot ? { ssid, psk: '', bssid: '', from: slot } : y)))} />
      </Card>
    </div>
  );
}
