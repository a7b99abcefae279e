// Small building blocks shared by the pages.

import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { message, missing } from './api';

export function Card(p: { title?: string; children: ComponentChildren; id?: string; actions?: ComponentChildren }) {
  return (
    <section class="card" id={p.id} aria-label={p.title}>
      {(p.title || p.actions) && (
        <header class="card-h">
          {p.title && <h2>{p.title}</h2>}
          {p.actions && <div class="row">{p.actions}</div>}
        </header>
      )}
      {p.children}
    </section>
  );
}

/** KV shows label/value pairs; null and undefined values are left out. */
export function KV(p: { rows: [string, ComponentChildren][]; testid?: string }) {
  return (
    <dl class="kv" data-testid={p.testid}>
      {p.rows
        .filter(([, v]) => v !== undefined && v !== null && v !== '')
        .map(([k, v]) => (
          <div key={k}>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </div>
        ))}
    </dl>
  );
}

export function Badge(p: { state: string; children?: ComponentChildren }) {
  return <span class={`badge s-${p.state.replace(/[^a-z_]/gi, '').toLowerCase()}`}>{p.children ?? p.state}</span>;
}

/** Problem shows an error; a 404 from an API path means the device lacks the capability. */
export function Problem(p: { err: unknown; what?: string }) {
  if (missing(p.err))
    return (
      <p class="lacks" role="status" data-testid="lacks">
        This device does not have {p.what ?? 'this capability'} (its endpoint answers 404).
      </p>
    );
  return (
    <p class="error" role="alert">
      {message(p.err)}
    </p>
  );
}

export function Loading() {
  return <p class="muted">Loading…</p>;
}

/** useAction runs an async action, tracking busy and its error or success note. */
export function useAction(): [(fn: () => Promise<string | void>) => Promise<void>, boolean, ComponentChildren] {
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState<ComponentChildren>(null);
  const run = async (fn: () => Promise<string | void>) => {
    setBusy(true);
    setNote(null);
    try {
      const msg = await fn();
      if (msg) setNote(<p class="ok" role="status">{msg}</p>);
    } catch (e) {
      setNote(<p class="error" role="alert">{message(e)}</p>);
    }
    setBusy(false);
  };
  return [run, busy, note];
}

export function bytes(n: unknown): string {
  if (typeof n !== 'number') return '';
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} B`;
}

export function duration(s: unknown): string {
  if (typeof s !== 'number' || s < 0) return '';
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = Math.floor(s % 60);
  return (d ? `${d}d ` : '') + (d || h ? `${h}h ` : '') + (d || h || m ? `${m}m ` : '') + `${sec}s`;
}

export function download(name: string, data: BlobPart, type: string) {
  const url = URL.createObjectURL(new Blob([data], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
