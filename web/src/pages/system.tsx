// System: info, reboot, factory reset behind a typed confirmation, the core dump summary and
// download, the API key (set, change, clear), and the power manager's decision from GET /power
// (a 404 means the device has no power management and the card says so). The decision moves
// with the uptime and the update state and has no event of its own, so the card reads it again
// every few seconds while the page is shown, and at once on a configuration or `ota` event.

import { useEffect, useState } from 'preact/hooks';
import { BASE, del, get, holdSession, missing, post, put } from '../api';
import { useRefresh } from '../live';
import { Card, KV, Problem, bytes, download, duration, useAction } from '../ui';
import type { Info } from './dashboard';

const RESET_WORD = 'erase';

interface Power {
  mode: string;
  decision: string;
  why: string;
  timer_wake?: boolean;
  wake_count?: number;
  last_awake_ms?: number | null;
  interval_s?: number;
  uptime_ms?: number;
  deadline_ms?: number | null;
  holds?: { total: number; by?: Record<string, number> };
}

const POWER_READ_MS = 5000;

export function SystemPage() {
  const [info, err] = useRefresh(() => get<Info>('/system/info'), ['config']);
  const [dump, dumpErr, reloadDump] = useRefresh(() => get<Record<string, unknown>>('/system/coredump'), []);
  const [power, powerErr, reloadPower] = useRefresh(() => get<Power>('/power'), ['config', 'ota']);
  useEffect(() => {
    const t = setInterval(reloadPower, POWER_READ_MS);
    return () => clearInterval(t);
  }, []);
  const [auth, , reloadAuth] = useRefresh(() => get<{ configured: boolean }>('/auth/status'), []);
  const [typed, setTyped] = useState('');
  const [key, setKey] = useState('');
  const [key2, setKey2] = useState('');
  const [run, busy, note] = useAction();
  const [runKey, busyKey, keyNote] = useAction();
  const hw = info?.hardware;
  const lr = info?.last_reset;
  const rawDump = () =>
    run(async () => {
      const r = await fetch(BASE + '/system/coredump/raw', { credentials: 'same-origin' });
      if (!r.ok) throw new Error(`download: HTTP ${r.status}`);
      download('coredump.bin', await r.arrayBuffer(), 'application/octet-stream');
    });
  const setApiKey = (clear: boolean) =>
    runKey(async () => {
      if (!clear) {
        if (key.length < 8 || key.length > 64) throw new Error('The key needs 8 to 64 characters.');
        if (key !== key2) throw new Error('The two keys differ.');
      }
      await holdSession(async () => {
        await put('/config', { httpd: { api_key: clear ? '' : key } });
        // Changing the key ends every session, this one too: sign in again with the new key.
        if (!clear) await post('/auth/login', { key });
      });
      setKey('');
      setKey2('');
      reloadAuth();
      return clear ? 'Key cleared: the API is open.' : 'Key set; this browser is signed in with it.';
    });
  return (
    <div class="grid">
      <Card title="Information">
        {err ? <Problem err={err} /> : null}
        {info && (
          <KV
            testid="sysinfo"
            rows={[
              ['Application', `${info.app} ${info.version}`],
              ['Platform', info.idf_version],
              ['Chip', `${info.chip} rev ${info.chip_revision}, ${info.cores} cores, ${hw?.cpu_mhz ?? '?'} MHz`],
              ['MAC', hw?.mac],
              ['Flash', bytes(hw?.flash_bytes)],
              ['RAM', hw && `${bytes(hw.ram_internal_bytes)} internal, ${hw.ram_psram_bytes ? bytes(hw.ram_psram_bytes) + ' PSRAM' : 'no PSRAM'}`],
              ['Features', hw?.features?.join(', ')],
              ['Uptime', duration(info.uptime_s)],
              ['Reset reason', info.reset_reason],
              ['Storage reset at boot', info.config_storage_reset ? 'yes' : 'no'],
              ['UI from storage', info.ui_storage ? 'yes' : 'no'],
              ['Watchdog reset', lr ? `${String(lr.health_key ?? '')}: ${String(lr.message ?? '')}` : undefined],
            ]}
          />
        )}
      </Card>
      <Card title="Restart">
        <button disabled={busy} onClick={() => confirm('Reboot the device?') && run(async () => (await post('/system/reboot'), 'Rebooting; the page reconnects by itself.'))}>
          Reboot
        </button>
        <h3>Factory reset</h3>
        <p>Erases every setting (WiFi passwords, the API key and the Signal K token included), then reboots. Type <code>{RESET_WORD}</code> to confirm.</p>
        <div class="row wrap">
          <input aria-label="Type erase to confirm" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} />
          <button class="danger" disabled={busy || typed !== RESET_WORD} onClick={() => run(async () => (await post('/system/factory-reset'), setTyped(''), 'Factory reset: rebooting.'))}>
            Factory reset
          </button>
        </div>
        {note}
      </Card>
      <Card title="Power">
        {powerErr ? (
          <Problem err={powerErr} what="power management" />
        ) : power ? (
          <KV
            testid="power"
            rows={[
              ['Mode', power.mode],
              ['Decision', `${power.decision} (${power.why})`],
              ['Sleeps every', power.interval_s != null ? `${power.interval_s} s` : undefined],
              ['This boot', power.timer_wake ? 'a timer wake from deep sleep' : 'not a timer wake'],
              ['Wakes', power.wake_count],
              ['Last wake', power.last_awake_ms != null ? `${power.last_awake_ms} ms awake` : undefined],
              ['Awake until', power.deadline_ms != null ? `uptime ${duration(Math.round(power.deadline_ms / 1000))}` : undefined],
              ['Holds', power.holds ? (power.holds.total ? Object.entries(power.holds.by ?? {}).map(([k, n]) => `${k}: ${n}`).join(', ') : 'none') : undefined],
            ]}
          />
        ) : null}
      </Card>
      <Card title="Core dump">
        {dumpErr ? (
          missing(dumpErr) ? <p class="muted">No core dump stored.</p> : <Problem err={dumpErr} />
        ) : dump ? (
          <>
            <KV rows={Object.entries(dump).filter(([, v]) => typeof v !== 'object').map(([k, v]) => [k, String(v)])} />
            <div class="row wrap">
              <button onClick={rawDump}>Download</button>
              <button class="danger" onClick={() => run(async () => (await del('/system/coredump'), reloadDump(), 'Core dump erased.'))}>
                Erase
              </button>
            </div>
          </>
        ) : null}
      </Card>
      <Card title="API key">
        <p>{auth?.configured ? 'A key is set: every request needs it (or a signed-in browser).' : 'No key is set: anyone on the network can manage the device.'}</p>
        <label>
          {auth?.configured ? 'New key' : 'Key'} (8 to 64 characters)
          <input type="password" autoComplete="new-password" value={key} onInput={(e) => setKey(e.currentTarget.value)} />
        </label>
        <label>
          The same key again
          <input type="password" autoComplete="new-password" value={key2} onInput={(e) => setKey2(e.currentTarget.value)} />
        </label>
        <div class="row wrap">
          <button class="primary" disabled={busyKey} onClick={() => setApiKey(false)}>
            {auth?.configured ? 'Change key' : 'Set key'}
          </button>
          {auth?.configured && (
            <button class="danger" disabled={busyKey} onClick={() => confirm('Clear the key and leave the API open?') && setApiKey(true)}>
              Clear key
            </button>
          )}
        </div>
        {keyNote}
      </Card>
    </div>
  );
}
