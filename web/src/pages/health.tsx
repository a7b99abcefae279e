// Health: every condition with its state and message, and drills (POST /health/test). Health
// has no event of its own; every condition change is logged, so the page reads /health again
// when the `logs` event arrives.

import { useState } from 'preact/hooks';
import { get, post } from '../api';
import { useRefresh } from '../live';
import { Badge, Card, Loading, Problem, useAction } from '../ui';

export interface HealthDoc {
  worst: string;
  fatal: string | null;
  conditions: { key: string; state: string; message: string; reboot_on_alarm: boolean }[];
  truncated?: number;
}

export function HealthPage() {
  const [h, err, reload] = useRefresh(() => get<HealthDoc>('/health'), ['logs']);
  const [key, setKey] = useState('test.drill');
  const [state, setState] = useState('warn');
  const [msg, setMsg] = useState('drill');
  const [ttl, setTtl] = useState('45');
  const [run, busy, note] = useAction();
  if (err) return <Problem err={err} />;
  if (!h) return <Loading />;
  return (
    <div>
      <Card title="Conditions" actions={<button onClick={reload}>Refresh</button>}>
        <p>
          Worst state <Badge state={h.worst} />
          {h.fatal && (
            <>
              {' '}
              — the watchdog would restart for <code>{h.fatal}</code>
            </>
          )}
        </p>
        <div class="table-wrap">
          <table class="tbl" data-testid="conditions">
            <thead>
              <tr>
                <th scope="col">Condition</th>
                <th scope="col">State</th>
                <th scope="col">Message</th>
                <th scope="col">Restarts</th>
              </tr>
            </thead>
            <tbody>
              {h.conditions.map((c) => (
                <tr key={c.key} data-key={c.key}>
                  <td>
                    <code>{c.key}</code>
                  </td>
                  <td>
                    <Badge state={c.state} />
                  </td>
                  <td>{c.message}</td>
                  <td>{c.reboot_on_alarm ? 'on alarm' : ''}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {h.truncated ? <p class="muted">{h.truncated} more not shown.</p> : null}
      </Card>
      <Card title="Drill">
        <p class="muted">A drill raises a test condition that expires by itself and never restarts the device; one drill at a time.</p>
        <form
          class="row wrap"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              const body: Record<string, unknown> = { key, state, message: msg };
              if (ttl) body.ttl_s = Number(ttl);
              await post('/health/test', body);
              reload();
              return state === 'normal' ? 'Drill cleared.' : 'Drill raised.';
            });
          }}
        >
          <label>
            Key
            <input value={key} onInput={(e) => setKey(e.currentTarget.value)} pattern="test\..+" />
          </label>
          <label>
            State
            <select value={state} onChange={(e) => setState(e.currentTarget.value)}>
              <option>warn</option>
              <option>alarm</option>
              <option>normal</option>
            </select>
          </label>
          <label>
            Message
            <input value={msg} onInput={(e) => setMsg(e.currentTarget.value)} />
          </label>
          <label>
            Expires after (s)
            <input value={ttl} inputMode="decimal" onInput={(e) => setTtl(e.currentTarget.value)} />
          </label>
          <button type="submit" disabled={busy}>
            Run drill
          </button>
        </form>
        {note}
      </Card>
    </div>
  );
}
