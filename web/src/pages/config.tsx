// The configuration page, generated from GET /config/schema (see schema.ts): one section per
// namespace (run-time f_<id> namespaces appear when the schema's ETag changes after a plugin
// registered one), x-dev-group tabs, and one control per key chosen by its schema.

import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, BASE, get, message, post, put } from '../api';
import { onEvent } from '../live';
import { Card, Loading, Problem, download } from '../ui';
import {
  type Draft,
  type Field,
  type Row,
  type Section,
  SENTINEL,
  buildPatch,
  cellText,
  cellValue,
  draftOf,
  encode,
  errorTarget,
  importDoc,
  isSet,
  parseSchema,
} from '../schema';

type Doc = Record<string, Record<string, unknown>>;

/** useSchema keeps the parsed schema, asking again (with If-None-Match) whenever a plugin
 * changed state or the stream reconnected, since either can add or drop a namespace. */
function useSchema(): [Section[] | undefined, unknown] {
  const [sections, setSections] = useState<Section[]>();
  const [err, setErr] = useState<unknown>();
  useEffect(() => {
    let etag = '';
    let alive = true;
    const load = async () => {
      try {
        const r = await fetch(BASE + '/config/schema', { headers: etag ? { 'If-None-Match': etag } : {}, credentials: 'same-origin', cache: 'no-store' });
        if (r.status === 304) return;
        if (!r.ok) throw new ApiError(r.status, ((await r.json().catch(() => ({}))) as { error?: string }).error ?? '', {});
        etag = r.headers.get('ETag') ?? '';
        const doc: unknown = await r.json();
        if (alive) setSections(parseSchema(doc));
      } catch (e) {
        if (alive) setErr(e);
      }
    };
    void load();
    const offs = ['plugins', 'config', '_open'].map((n) => onEvent(n, () => void load()));
    return () => {
      alive = false;
      offs.forEach((f) => f());
    };
  }, []);
  return [sections, err];
}

function useValues(): [Doc | undefined, () => Promise<void>] {
  const [doc, setDoc] = useState<Doc>();
  const load = async () => {
    try {
      setDoc(await get<Doc>('/config'));
    } catch {
      // the page shows the schema's error; values come with the next event
    }
  };
  useEffect(() => {
    void load();
    const offs = ['config', 'plugins', '_open'].map((n) => onEvent(n, () => void load()));
    return () => offs.forEach((f) => f());
  }, []);
  return [doc, load];
}

export function ConfigPage() {
  const [sections, err] = useSchema();
  const [values, reload] = useValues();
  const [ns, setNs] = useState('');
  const [note, setNote] = useState<preact.ComponentChildren>(null);
  const [ext, setExt] = useState<{ path: string; msg: string; n: number }>();
  useEffect(() => {
    if (sections && !sections.find((s) => s.ns === ns) && sections.length) setNs(sections[0].ns);
  }, [sections]);
  if (err) return <Problem err={err} />;
  if (!sections || !values) return <Loading />;
  const sec = sections.find((s) => s.ns === ns) ?? sections[0];

  const exportDoc = async () => {
    const doc = await get<Doc>('/config');
    download('devhost-config.json', JSON.stringify(doc, null, 2) + '\n', 'application/json');
  };
  const importFile = async (file: File) => {
    setNote(null);
    try {
      const { doc, skipped } = importDoc(sections, JSON.parse(await file.text()));
      const r = await put<{ changed: string[]; restart_required: boolean }>('/config', doc);
      await reload();
      setNote(
        <div role="status" class="ok">
          Imported: {r.changed.length} key{r.changed.length === 1 ? '' : 's'} changed{skipped.length ? `; skipped ${skipped.join(', ')}` : ''}.
          {r.restart_required && <RebootOffer />}
        </div>,
      );
    } catch (e) {
      const path = e instanceof ApiError ? e.body.path : undefined;
      const t = errorTarget(path);
      if (t.ns && sections.some((s) => s.ns === t.ns)) {
        // Show the refusal on the field (or section) the device named.
        setNs(t.ns);
        if (t.field) setExt({ path: t.field, msg: e instanceof ApiError && typeof e.body.message === 'string' ? e.body.message : message(e), n: Date.now() });
      }
      setNote(
        <p class="error" role="alert">
          Import refused: {message(e)}
          {typeof path === 'string' && path ? ` (${path})` : ''}
        </p>,
      );
    }
  };

  return (
    <div class="config">
      <div class="row wrap">
        <label class="inline">
          Section
          <select value={sec.ns} onChange={(e) => setNs(e.currentTarget.value)} data-testid="ns-select">
            {sections.map((s) => (
              <option key={s.ns} value={s.ns}>
                {s.title} ({s.ns})
              </option>
            ))}
          </select>
        </label>
        <span class="grow" />
        <button onClick={exportDoc}>Export</button>
        <label class="button">
          Import
          <input
            type="file"
            accept="application/json,.json"
            class="hidden-file"
            data-testid="import"
            onChange={(e) => {
              const f = e.currentTarget.files?.[0];
              if (f) void importFile(f);
              e.currentTarget.value = '';
            }}
          />
        </label>
      </div>
      {note}
      <nav class="ns-tabs" aria-label="Sections">
        {sections.map((s) => (
          <button key={s.ns} class={s.ns === sec.ns ? 'tab active' : 'tab'} aria-pressed={s.ns === sec.ns} onClick={() => setNs(s.ns)} data-ns={s.ns}>
            {s.title}
            {s.runtime && <small> plugin</small>}
          </button>
        ))}
      </nav>
      <NsForm key={sec.ns} sec={sec} stored={values[sec.ns] ?? {}} onSaved={reload} ext={ext} />
    </div>
  );
}

function RebootOffer() {
  const [state, setState] = useState('');
  return (
    <span class="reboot-offer">
      {' '}
      A changed setting takes effect after a reboot.{' '}
      <button
        type="button"
        disabled={state !== ''}
        onClick={async () => {
          try {
            await post('/system/reboot');
            setState('Rebooting…');
          } catch (e) {
            setState(message(e));
          }
        }}
      >
        Reboot now
      </button>{' '}
      {state}
    </span>
  );
}

function NsForm(p: { sec: Section; stored: Record<string, unknown>; onSaved: () => Promise<void>; ext?: { path: string; msg: string; n: number } }) {
  const { sec, stored } = p;
  const [group, setGroup] = useState(sec.groups[0]?.name ?? '');
  const [drafts, setDrafts] = useState<Record<string, Draft>>({});
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [result, setResult] = useState<preact.ComponentChildren>(null);
  const [busy, setBusy] = useState(false);
  const fields = useMemo(() => sec.groups.flatMap((g) => g.fields), [sec]);
  const g = sec.groups.find((x) => x.name === group) ?? sec.groups[0];
  const draft = (f: Field): Draft => drafts[f.path] ?? draftOf(f, stored[f.key]);
  const setDraft = (f: Field, d: Draft) => {
    setDrafts({ ...drafts, [f.path]: d });
    const e = f.secret && d === '' ? { ok: true } : encode(f, d);
    const next = { ...errors };
    if (e.ok) delete next[f.path];
    else next[f.path] = (e as { error: string }).error;
    setErrors(next);
  };
  const dirty = Object.keys(drafts).length > 0;
  useEffect(() => {
    const f = p.ext && fields.find((x) => x.path === p.ext!.path);
    if (!f || !p.ext) return;
    setErrors((e) => ({ ...e, [f.path]: p.ext!.msg }));
    setGroup(f.group);
  }, [p.ext?.n]);

  const save = async (e: Event) => {
    e.preventDefault();
    setResult(null);
    const all: Record<string, Draft> = {};
    for (const f of fields) all[f.path] = draft(f);
    const patch = buildPatch(fields, stored, all);
    if (Object.keys(patch.errors).length) {
      setErrors(patch.errors);
      const first = fields.find((f) => patch.errors[f.path]);
      if (first && first.group !== g.name) setGroup(first.group);
      setResult(<p class="error" role="alert">Fix the marked fields; nothing was sent.</p>);
      return;
    }
    if (!Object.keys(patch.doc).length) {
      setDrafts({});
      setResult(<p class="muted" role="status">Nothing changed.</p>);
      return;
    }
    setBusy(true);
    try {
      const r = await put<{ changed: string[]; restart_required: boolean }>('/config', patch.doc);
      setDrafts({});
      setErrors({});
      await p.onSaved();
      setResult(
        <div class="ok" role="status" data-testid="saved">
          Saved{r.changed.length ? `: ${r.changed.join(', ')}` : ''}.{r.restart_required && <RebootOffer />}
        </div>,
      );
    } catch (x) {
      if (x instanceof ApiError && x.code === 'validation') {
        const t = errorTarget(x.body.path);
        const msg = typeof x.body.message === 'string' && x.body.message ? x.body.message : 'Refused by the device.';
        const f = fields.find((ff) => ff.path === t.field);
        if (f) {
          setErrors({ ...errors, [f.path]: msg });
          if (f.group !== g.name) setGroup(f.group);
          setResult(<p class="error" role="alert">The device refused {f.title}; nothing was written.</p>);
        } else setResult(<p class="error" role="alert">Refused: {msg}</p>);
      } else setResult(<p class="error" role="alert">{message(x)}</p>);
    }
    setBusy(false);
  };

  return (
    <form class="card" onSubmit={save} aria-label={sec.title} data-testid={`ns-${sec.ns}`} noValidate>
      <header class="card-h">
        <h2>
          {sec.title} <small class="muted">{sec.ns}</small>
        </h2>
      </header>
      {sec.description && <p class="muted">{sec.description}</p>}
      {sec.groups.length > 1 && (
        <div class="tabs" role="tablist" aria-label="Groups">
          {sec.groups.map((x) => (
            <button type="button" role="tab" key={x.name} aria-selected={x.name === g.name} class={x.name === g.name ? 'tab active' : 'tab'} onClick={() => setGroup(x.name)}>
              {x.name}
              {x.fields.some((f) => errors[f.path]) && <span class="dot" aria-label="has errors" />}
            </button>
          ))}
        </div>
      )}
      <div role="tabpanel">
        {g?.fields.map((f) => (
          <FieldRow key={f.path} f={f} stored={stored[f.key]} draft={draft(f)} error={errors[f.path]} onDraft={(d) => setDraft(f, d)} />
        ))}
      </div>
      {result}
      <div class="row">
        <button class="primary" type="submit" disabled={busy}>
          Save
        </button>
        <button
          type="button"
          disabled={!dirty}
          onClick={() => {
            setDrafts({});
            setErrors({});
            setResult(null);
          }}
        >
          Undo changes
        </button>
      </div>
    </form>
  );
}

function FieldRow(p: { f: Field; stored: unknown; draft: Draft; error?: string; onDraft: (d: Draft) => void }) {
  const { f } = p;
  const id = `f-${f.ns}-${f.key}`;
  const desc = `${id}-d`;
  const ro = f.readOnly || !!f.movesTo;
  const common = { id, name: f.path, 'aria-describedby': desc, 'aria-invalid': p.error ? true : undefined, disabled: ro, 'data-path': f.path };
  let control: preact.ComponentChildren;
  switch (f.kind) {
    case 'bool':
      control = <input type="checkbox" {...common} checked={p.draft === true} onChange={(e) => p.onDraft(e.currentTarget.checked)} />;
      break;
    case 'enum':
      control = (
        <select {...common} value={p.draft as string} onChange={(e) => p.onDraft(e.currentTarget.value)}>
          {f.enum!.map((v) => (
            <option key={v} value={v}>
              {v}
            </option>
          ))}
        </select>
      );
      break;
    case 'int':
    case 'float':
      control = <input type="text" inputMode="decimal" {...common} value={p.draft as string} onInput={(e) => p.onDraft(e.currentTarget.value)} />;
      break;
    case 'secret':
      control = (
        <input
          type="password"
          autoComplete="new-password"
          {...common}
          value={p.draft as string}
          placeholder={isSet(p.stored) ? 'set (type to replace)' : 'not set'}
          onInput={(e) => p.onDraft(e.currentTarget.value)}
        />
      );
      break;
    case 'table':
      control = <TableEditor f={f} rows={p.draft as Row[]} onRows={p.onDraft} disabled={ro} />;
      break;
    case 'blob':
      control = (
        <>
          <textarea {...common} rows={3} value={p.draft as string} onInput={(e) => p.onDraft(e.currentTarget.value)} />
          {!ro && (
            <input
              type="file"
              aria-label={`${f.title} from a file`}
              onChange={async (e) => {
                const file = e.currentTarget.files?.[0];
                if (!file) return;
                const b = new Uint8Array(await file.arrayBuffer());
                let s = '';
                for (const c of b) s += String.fromCharCode(c);
                p.onDraft(btoa(s));
              }}
            />
          )}
        </>
      );
      break;
    default:
      control = <input type="text" {...common} value={p.draft as string} onInput={(e) => p.onDraft(e.currentTarget.value)} />;
  }
  return (
    <div class={`field k-${f.kind}${p.error ? ' invalid' : ''}`} data-field={f.path}>
      <label for={id}>
        {f.title}
        {f.unit && <span class="unit"> ({f.unit})</span>}
        {f.restart && (
          <span class="tag" title="Takes effect after a reboot">
            restart
          </span>
        )}
        {ro && <span class="tag">read-only</span>}
        {f.secret && <span class={`tag ${isSet(p.stored) ? 'set' : ''}`} data-testid="secret-state">{isSet(p.stored) ? 'set' : 'not set'}</span>}
      </label>
      <div class="control">{control}</div>
      <small id={desc} class="muted">
        {f.movesTo ? `Moved to ${f.movesTo}.` : f.description}
      </small>
      {p.error && (
        <p class="field-error" role="alert" data-testid="field-error">
          {p.error}
        </p>
      )}
    </div>
  );
}

function TableEditor(p: { f: Field; rows: Row[]; onRows: (r: Row[]) => void; disabled: boolean }) {
  const { f, rows } = p;
  const set = (i: number, c: string, text: string) => p.onRows(rows.map((r, j) => (j === i ? { ...r, [c]: cellValue(text) } : r)));
  return (
    <div class="table-wrap">
      <table class="tbl" data-testid={`table-${f.path}`}>
        <thead>
          <tr>
            {f.columns.map((c) => (
              <th key={c} scope="col">
                {c}
              </th>
            ))}
            <th>
              <span class="sr">Row actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <tr key={i}>
              {f.columns.map((c) => (
                <td key={c}>
                  <input aria-label={`${c}, row ${i + 1}`} value={cellText(r[c])} disabled={p.disabled} onInput={(e) => set(i, c, e.currentTarget.value)} />
                </td>
              ))}
              <td>
                <button type="button" disabled={p.disabled} aria-label={`Remove row ${i + 1}`} onClick={() => p.onRows(rows.filter((_, j) => j !== i))}>
                  ✕
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <button type="button" disabled={p.disabled} onClick={() => p.onRows([...rows, Object.fromEntries(f.columns.map((c) => [c, null]))])}>
        Add row
      </button>
    </div>
  );
}

