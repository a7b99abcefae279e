// Signal K: the client's status, discovered servers, the access-request flow explained where
// it happens, token state and reason, the TLS pin beside the presented certificate (forget
// it), a CA upload, and a test PUT.

import { useState } from 'preact/hooks';
import { del, get, post, put } from '../api';
import { useEvent, useRefresh } from '../live';
import { Badge, Card, KV, Problem, useAction } from '../ui';

interface Identity {
  subject?: string;
  issuer?: string;
  sans?: string[];
  not_after?: string;
  sha256?: string;
}
interface SkStatus {
  server?: { host?: string; port?: number; scheme?: string; self?: string; source?: string; scheme_guessed?: boolean };
  token?: { state?: string; reason?: string; since_s?: number; next_retry_s?: number | null; client_id?: string; has_token?: boolean };
  ws?: { connected?: boolean; state?: string; sent?: number; buffered?: number; dropped?: number; next_retry_s?: number; in?: { subs?: number; frames?: number; received?: number }; put?: { pending?: number; ok?: number; failed?: number } };
}
interface Servers {
  servers: { self: string; roles: string[]; swname: string; swvers: string; host: string; port: number; scheme: string; chosen?: boolean; skipped_s?: number }[];
}
interface TlsDoc {
  server: string;
  mode: string;
  state: string;
  anchor: string | null;
  pinned: (Identity & { kind?: string; names?: string[] }) | null;
  presented: (Identity & { ca?: Identity | null }) | null;
  cas: (Identity & { source?: string })[];
  error: string;
}

const STEPS: Record<string, string> = {
  NO_SERVER: 'No server is known. Set the server address in Configuration, Signal K (server_host and server_port), or let discovery find one.',
  IDLE: 'The device is about to ask the server for access.',
  REQUESTED:
    'The device asked the server for access. On the Signal K server open Security, Access Requests, find the request with this client id and approve it with Read/Write permission. The token arrives within a minute.',
  VERIFYING: 'The server approved the device; the token is being checked.',
  APPROVED: 'The device holds a working token.',
  OPEN: 'The server runs without security: no token is needed.',
  DENIED: 'The server refused the request (or does not accept device requests: enable "Allow device access requests" in its security settings). Ask again below.',
  ERROR: 'The server did not answer usefully; the device retries by itself.',
  cert_error: 'The server\'s certificate does not match the one the device trusts. Compare them below, then forget the pin or upload the right CA.',
};

function Cert(p: { title: string; c?: Identity | null }) {
  if (!p.c) return null;
  return (
    <div class="cert">
      <h3>{p.title}</h3>
      <KV rows={[['Subject', p.c.subject], ['Issuer', p.c.issuer], ['Names', p.c.sans?.join(', ')], ['Expires', p.c.not_after], ['SHA-256', p.c.sha256 && <code class="wrap">{p.c.sha256}</code>]]} />
    </div>
  );
}

export function SignalKPage() {
  const ev = useEvent<SkStatus>('sk');
  const [st, err] = useRefresh(() => get<SkStatus>('/sk/status'), ['sk', 'sk_ws']);
  const srvEv = useEvent<Servers>('sk_servers');
  const tlsEv = useEvent<TlsDoc>('sk_tls');
  const [tls] = useRefresh(() => get<TlsDoc>('/sk/tls'), ['sk_tls']);
  const [last, , reloadPut] = useRefresh(() => get<{ path: string; value: unknown; state: string; statusCode?: number; message?: string }>('/sk/put'), ['sk', 'sk_ws']);
  const [run, busy, note] = useAction();
  const [runTls, busyTls, noteTls] = useAction();
  const [runPut, busyPut, notePut] = useAction();
  const [token, setToken] = useState('');
  const [pem, setPem] = useState('');
  const [path, setPath] = useState('electrical.switches.anchorLight.state');
  const [value, setValue] = useState('1');
  if (err && !ev) return <Problem err={err} what="a Signal K client" />;
  const s = st ?? ev;
  const t = tlsEv ?? tls;
  const state = s?.token?.state ?? '';
  return (
    <div class="grid">
      <Card title="Link">
        <KV
          testid="sk-status"
          rows={[
            ['Server', s?.server?.host ? `${s.server.scheme || '?'}://${s.server.host}:${s.server.port} (${s.server.source})` : 'none'],
            ['Self', s?.server?.self],
            ['Token', state && <Badge state={state} />],
            ['Reason', s?.token?.reason],
            ['Client id', s?.token?.client_id && <code>{s.token.client_id}</code>],
            ['Stream', s?.ws ? `${s.ws.connected ? 'connected' : s.ws.state ?? 'down'}, ${s.ws.sent ?? 0} sent, ${s.ws.buffered ?? 0} buffered, ${s.ws.dropped ?? 0} dropped` : undefined],
            ['PUTs', s?.ws?.put ? `${s.ws.put.ok ?? 0} ok, ${s.ws.put.failed ?? 0} failed, ${s.ws.put.pending ?? 0} pending` : undefined],
          ]}
        />
        {STEPS[state] && <p class="explain" data-testid="sk-explain">{STEPS[state]}</p>}
        <div class="row wrap">
          <button disabled={busy} onClick={() => run(async () => (await post('/sk/request'), 'Asked the server again.'))}>
            Ask for access again
          </button>
        </div>
        <form
          class="row wrap"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              await post('/sk/token', { token });
              setToken('');
              return 'Token accepted by the server.';
            });
          }}
        >
          <label class="grow">
            Token from the server
            <input type="password" value={token} onInput={(e) => setToken(e.currentTarget.value)} />
          </label>
          <button type="submit" disabled={busy || !token}>
            Use token
          </button>
        </form>
        {note}
      </Card>
      <Card title="Discovered servers">
        {!srvEv?.servers.length && <p class="muted">None found (discovery needs mDNS interfaces; otherwise set the server in Configuration).</p>}
        <ul class="conds">
          {srvEv?.servers.map((x) => (
            <li key={x.self + x.host}>
              {x.chosen && <Badge state="chosen" />} <strong>{x.swname} {x.swvers}</strong> {x.scheme}://{x.host}:{x.port} <span class="muted">{x.roles.join(', ')} {x.self}</span>
            </li>
          ))}
        </ul>
      </Card>
      <Card title="TLS trust">
        {t && (
          <>
            <KV rows={[['Mode', t.mode], ['State', <Badge state={t.state} />], ['Anchor', t.anchor ?? 'none'], ['Problem', t.error]]} />
            <div class="cols">
              <Cert title={`Pinned (${t.pinned?.kind ?? ''})`} c={t.pinned} />
              <Cert title="Presented by the server" c={t.presented} />
            </div>
            {t.cas.map((c) => (
              <Cert key={c.sha256} title={`CA (${c.source})`} c={c} />
            ))}
            <button disabled={busyTls} onClick={() => runTls(async () => (await del('/sk/tls'), 'Pin forgotten; the device retries now.'))}>
              Forget the pin
            </button>
          </>
        )}
        <label>
          CA certificate (PEM)
          <textarea rows={4} value={pem} onInput={(e) => setPem(e.currentTarget.value)} placeholder="-----BEGIN CERTIFICATE-----" />
        </label>
        <div class="row wrap">
          <input type="file" accept=".pem,.crt,.cer" aria-label="CA certificate file" onChange={async (e) => setPem((await e.currentTarget.files?.[0]?.text()) ?? '')} />
          <button disabled={busyTls || !pem} onClick={() => runTls(async () => (await put('/sk/tls/ca', { pem }), 'CA anchored.'))}>
            Upload CA
          </button>
        </div>
        {noteTls}
      </Card>
      <Card title="Test PUT">
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void runPut(async () => {
              let v: unknown = value;
              try {
                v = JSON.parse(value);
              } catch {
                v = value; // not JSON: send the text as a string
              }
              await post('/sk/put', { path, value: v });
              // The answer comes from the server later (the device gives up after 10 s):
              // read it again a few times after the PUT.
              for (const ms of [300, 1500, 4000, 11000]) setTimeout(reloadPut, ms);
              return 'PUT sent.';
            });
          }}
        >
          <label>
            Path
            <input value={path} onInput={(e) => setPath(e.currentTarget.value)} />
          </label>
          <label>
            Value (JSON)
            <input value={value} onInput={(e) => setValue(e.currentTarget.value)} />
          </label>
          <button type="submit" disabled={busyPut}>
            Send PUT
          </button>
        </form>
        {notePut}
        {last && last.path && <KV testid="sk-put" rows={[['Last PUT', last.path], ['Answer', last.state], ['Status', last.statusCode], ['Message', last.message]]} />}
      </Card>
    </div>
  );
}
