// Updates (OTA): running and other slot, check, the available build with its notes, install
// from the manifest or a URL, progress from the `ota` events, confirm and roll back. The
// status document's members beyond running.rolled_back and other_version are read as
// optional; a 404 means the device has no update capability.

import { useState } from 'preact/hooks';
import { get, post } from '../api';
import { useEvent, useRefresh } from '../live';
import { Badge, Card, KV, Loading, Problem, bytes, useAction } from '../ui';

interface OtaStatus {
  state?: string;
  progress?: number | null;
  error?: string | null;
  running?: { version?: string; slot?: number; confirmed?: boolean; rolled_back?: boolean };
  other_version?: string | null;
  other_state?: string;
  available?: { version?: string; url?: string; channel?: string; size?: number; notes?: string; date?: string } | null;
  bytes?: number;
  total?: number;
  source?: string;
  last_check?: number | null;
}

export function UpdatesPage() {
  const ev = useEvent<OtaStatus>('ota');
  const [st, err] = useRefresh(() => get<OtaStatus>('/ota/status'), ['ota']);
  const [url, setUrl] = useState('');
  const [run, busy, note] = useAction();
  if (err && !ev) return <Problem err={err} what="firmware updates" />;
  const s = ev ?? st;
  if (!s) return <Loading />;
  const pct = typeof s.progress === 'number' ? s.progress : s.total ? Math.round((100 * (s.bytes ?? 0)) / s.total) : undefined;
  const r = s.running ?? {};
  return (
    <div class="grid">
      <Card title="Firmware">
        <KV
          testid="ota"
          rows={[
            ['State', s.state && <Badge state={s.state} />],
            ['Running', r.version && `${r.version} (slot ${r.slot ?? '?'}, ${r.confirmed === false ? 'not yet confirmed' : 'confirmed'})`],
            ['Other slot', s.other_version ? `${s.other_version}${s.other_state ? ` (${s.other_state})` : ''}` : 'empty'],
            ['Rolled back', r.rolled_back ? 'yes: the other slot holds an image that failed' : undefined],
            ['Image from', s.source || undefined],
            ['Last check', s.last_check ? new Date(s.last_check).toISOString() : undefined],
            ['Problem', s.error ?? undefined],
          ]}
        />
        {pct !== undefined && s.state !== 'idle' && (
          <div class="bar" role="progressbar" aria-label="Download" aria-valuenow={pct} aria-valuemin={0} aria-valuemax={100}>
            <span style={{ width: `${pct}%` }} />
          </div>
        )}
        {s.total ? (
          <p class="muted">
            {bytes(s.bytes)} of {bytes(s.total)}
          </p>
        ) : null}
        <div class="row wrap">
          <button disabled={busy} onClick={() => run(async () => (await post('/ota/check'), 'Checking the manifest.'))}>
            Check now
          </button>
          {r.confirmed === false && (
            <button disabled={busy} onClick={() => run(async () => (await post('/ota/confirm'), 'Confirmed.'))}>
              Confirm this build
            </button>
          )}
          <button class="danger" disabled={busy || !s.other_version} onClick={() => confirm('Roll back to the other slot and reboot?') && run(async () => (await post('/ota/rollback'), 'Rolling back.'))}>
            Roll back
          </button>
        </div>
        {note}
      </Card>
      <Card title="Available">
        {s.available ? (
          <>
            <KV rows={[['Version', s.available.version], ['Channel', s.available.channel], ['Size', bytes(s.available.size)], ['Date', s.available.date]]} />
            {s.available.notes && <pre class="notes">{s.available.notes}</pre>}
            <button class="primary" disabled={busy} onClick={() => run(async () => (await post('/ota', {}), 'Installing from the manifest.'))}>
              Install {s.available.version}
            </button>
          </>
        ) : (
          <p class="muted">No newer build known.</p>
        )}
        <form
          class="row wrap"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => (await post('/ota', { url }), 'Installing from the URL.'));
          }}
        >
          <label class="grow">
            Install from a URL
            <input type="url" value={url} onInput={(e) => setUrl(e.currentTarget.value)} placeholder="http://…/firmware.bin" />
          </label>
          <button type="submit" disabled={busy || !url}>
            Install
          </button>
        </form>
      </Card>
    </div>
  );
}
