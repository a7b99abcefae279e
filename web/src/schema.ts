// The configuration form is generated from GET /config/schema alone: this module turns the
// schema document into sections, groups and fields, converts between stored and shown values,
// checks a draft the way the schema says, and builds the PUT /config document. It has no DOM
// code, so it is unit-tested under node.

export const SENTINEL = '********';

export type Kind = 'bool' | 'int' | 'float' | 'string' | 'enum' | 'secret' | 'table' | 'blob';

export interface Field {
  ns: string;
  key: string;
  path: string; // "<ns>.<key>", as a validation error names it
  title: string;
  description: string;
  kind: Kind;
  default: unknown;
  min?: number;
  max?: number;
  maxLength?: number; // bytes for strings; base64 characters for blobs
  maxBytes?: number; // decoded limit of a blob
  shortMax?: number; // "empty or at least shortMax+1 long" (the schema's `not` rule)
  pattern?: string;
  enum?: string[];
  secret: boolean;
  readOnly: boolean;
  restart: boolean;
  unit: string;
  group: string;
  multiplier: number;
  offset: number;
  columns: string[];
  movesTo: string;
}

export interface Group {
  name: string;
  fields: Field[];
}

export interface Section {
  ns: string;
  title: string;
  description: string;
  version: number;
  runtime: boolean;
  groups: Group[];
}

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The name of the group of keys without `x-dev-group`. */
export const GENERAL = 'General';

/** parseSchema reads the schema document into sections, in the document's order. */
export function parseSchema(doc: unknown): Section[] {
  if (!isObj(doc) || !isObj(doc.properties)) return [];
  const sections: Section[] = [];
  for (const [ns, nsv] of Object.entries(doc.properties)) {
    if (!isObj(nsv) || !isObj(nsv.properties)) continue;
    const groups: Group[] = [];
    for (const [key, kv] of Object.entries(nsv.properties)) {
      if (!isObj(kv)) continue;
      const f = parseField(ns, key, kv);
      // A key that moved elsewhere (x-dev-movesTo) reads back empty and is not edited here.
      if (f.movesTo) continue;
      let g = groups.find((x) => x.name === f.group);
      if (!g) groups.push((g = { name: f.group, fields: [] }));
      g.fields.push(f);
    }
    sections.push({
      ns,
      title: str(nsv.title) || ns,
      description: str(nsv.description),
      version: num(nsv['x-dev-version']) ?? 0,
      runtime: nsv['x-dev-runtime'] === true,
      groups,
    });
  }
  return sections;
}

function parseField(ns: string, key: string, s: Obj): Field {
  const disp = isObj(s['x-dev-display']) ? s['x-dev-display'] : isObj(s.x) ? s.x : {};
  const secret = s['x-dev-secret'] === true || s.writeOnly === true;
  const blob = s['x-dev-type'] === 'blob';
  const columns = Array.isArray(disp.columns) ? disp.columns.filter((c): c is string => typeof c === 'string') : [];
  const en = Array.isArray(s.enum) ? s.enum.filter((e): e is string => typeof e === 'string') : undefined;
  let kind: Kind;
  switch (s.type) {
    case 'boolean':
      kind = 'bool';
      break;
    case 'integer':
      kind = 'int';
      break;
    case 'number':
      kind = 'float';
      break;
    default:
      kind = secret ? 'secret' : blob ? 'blob' : disp.format === 'table' ? 'table' : en ? 'enum' : 'string';
  }
  const mult = num(disp.displayMultiplier);
  const not = isObj(s.not) ? s.not : undefined;
  return {
    ns,
    key,
    path: `${ns}.${key}`,
    title: str(s.title) || key,
    description: str(s.description),
    kind,
    default: s.default,
    min: num(s.minimum),
    max: num(s.maximum),
    maxLength: num(s.maxLength),
    maxBytes: num(s['x-dev-maxBytes']),
    shortMax: not && num(not.minLength) === 1 ? num(not.maxLength) : undefined,
    pattern: typeof s.pattern === 'string' ? s.pattern : undefined,
    enum: en,
    secret,
    readOnly: s.readOnly === true,
    restart: s['x-dev-restartRequired'] === true,
    unit: str(s['x-dev-unit']),
    group: str(s['x-dev-group']) || GENERAL,
    multiplier: mult !== undefined && mult !== 0 ? mult : 1,
    offset: num(disp.displayOffset) ?? 0,
    columns,
    movesTo: str(s['x-dev-movesTo']),
  };
}

/** Rounds away binary noise (0.1*3) without losing a digit a person typed. */
export function tidy(n: number): number {
  return Number.parseFloat(n.toPrecision(12));
}

/** toShown applies the presentation transform: stored * displayMultiplier + displayOffset. */
export function toShown(f: Field, stored: number): number {
  if (f.multiplier === 1 && f.offset === 0) return stored;
  return tidy(stored * f.multiplier + f.offset);
}

/** toStored is the exact inverse of toShown; integer keys are rounded to the nearest integer. */
export function toStored(f: Field, shown: number): number {
  const v = f.multiplier === 1 && f.offset === 0 ? shown : (shown - f.offset) / f.multiplier;
  return f.kind === 'int' ? Math.round(v) : v;
}

/** utf8Len counts bytes, as the device does for maxLength. */
export function utf8Len(s: string): number {
  return new TextEncoder().encode(s).length;
}

export type Row = Record<string, unknown>;

/** parseTable reads a table key's JSON text; anything but an array of objects is no rows. */
export function parseTable(text: unknown): Row[] {
  if (typeof text !== 'string' || text === '') return [];
  try {
    const v: unknown = JSON.parse(text);
    return Array.isArray(v) ? v.filter(isObj) : [];
  } catch {
    return [];
  }
}

/** cellValue reads the text typed into a table cell: empty is null, true/false are booleans,
 * a plain decimal number is a number, anything else is a string. */
export function cellValue(text: string): unknown {
  const t = text.trim();
  if (t === '') return null;
  if (t === 'true') return true;
  if (t === 'false') return false;
  if (/^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(t)) return Number(t);
  return text;
}

export function cellText(v: unknown): string {
  return v === null || v === undefined ? '' : String(v);
}

/** serializeTable writes rows with exactly the named columns, in order. */
export function serializeTable(columns: string[], rows: Row[]): string {
  return JSON.stringify(
    rows.map((r) => {
      const o: Row = {};
      for (const c of columns) o[c] = r[c] ?? null;
      return o;
    }),
  );
}

/** A draft is what the form holds for one field: text for inputs, a boolean for a switch,
 * rows for a table. */
export type Draft = string | boolean | Row[];

/** draftOf turns a stored value into the form's draft. Secrets always start empty (never
 * revealed); a table starts as its rows. */
export function draftOf(f: Field, stored: unknown): Draft {
  switch (f.kind) {
    case 'bool':
      return stored === true;
    case 'secret':
      return '';
    case 'table':
      return parseTable(stored);
    case 'int':
    case 'float':
      return typeof stored === 'number' ? String(toShown(f, stored)) : '';
    default:
      return typeof stored === 'string' ? stored : '';
  }
}

export type Encoded = { ok: true; value: unknown } | { ok: false; error: string };

/** encode checks a draft against the field's schema and returns the value to store. */
export function encode(f: Field, d: Draft): Encoded {
  const bad = (error: string): Encoded => ({ ok: false, error });
  switch (f.kind) {
    case 'bool':
      return { ok: true, value: d === true };
    case 'table': {
      const text = serializeTable(f.columns, Array.isArray(d) ? d : []);
      if (f.maxLength !== undefined && utf8Len(text) > f.maxLength) return bad(`The table is too long (at most ${f.maxLength} bytes).`);
      return { ok: true, value: text };
    }
    case 'int':
    case 'float': {
      const t = typeof d === 'string' ? d.trim() : '';
      if (t === '' || !/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t)) return bad('Enter a number.');
      const shown = Number(t);
      if (f.kind === 'int' && f.multiplier === 1 && f.offset === 0 && !Number.isInteger(shown)) return bad('Enter a whole number.');
      const v = toStored(f, shown);
      const lo = f.min !== undefined ? toShown(f, f.min) : undefined;
      const hi = f.max !== undefined ? toShown(f, f.max) : undefined;
      if ((f.min !== undefined && v < f.min) || (f.max !== undefined && v > f.max)) {
        const [a, b] = lo !== undefined && hi !== undefined && lo > hi ? [hi, lo] : [lo, hi];
        if (a !== undefined && b !== undefined) return bad(`Between ${a} and ${b}.`);
        return bad(a !== undefined ? `At least ${a}.` : `At most ${b}.`);
      }
      return { ok: true, value: v };
    }
    default: {
      const t = typeof d === 'string' ? d : '';
      if (f.enum && !f.enum.includes(t)) return bad(`One of ${f.enum.join(', ')}.`);
      const n = f.kind === 'blob' ? t.length : utf8Len(t);
      if (f.maxLength !== undefined && n > f.maxLength) return bad(`At most ${f.maxLength} ${f.kind === 'blob' ? 'characters' : 'bytes'}.`);
      if (f.shortMax !== undefined && n >= 1 && n <= f.shortMax) return bad(`Empty, or at least ${f.shortMax + 1} characters.`);
      if (f.pattern && !(f.secret && t === SENTINEL)) {
        let re: RegExp | undefined;
        try {
          re = new RegExp(f.pattern, 'u');
        } catch {
          re = undefined; // a pattern this browser cannot read is left to the device
        }
        if (re && !re.test(t)) return bad('Not in the expected format.');
      }
      return { ok: true, value: t };
    }
  }
}

/** isSet says whether a secret holds a value: it reads back as the sentinel. */
export const isSet = (stored: unknown): boolean => stored === SENTINEL;

export interface Patch {
  doc: Record<string, Record<string, unknown>>;
  errors: Record<string, string>; // by field path
  restart: boolean; // a changed key is restart-required
}

/**
 * buildPatch compares the drafts of a section with the stored values and returns the PUT
 * /config document of what changed. readOnly keys are never sent; a secret is sent only
 * when something was typed into it (an untouched secret stays the sentinel on the device).
 */
export function buildPatch(fields: Field[], stored: Record<string, unknown>, drafts: Record<string, Draft>): Patch {
  const p: Patch = { doc: {}, errors: {}, restart: false };
  for (const f of fields) {
    if (f.readOnly || f.movesTo) continue;
    const d = drafts[f.path];
    if (d === undefined) continue;
    if (f.secret && (d === '' || d === SENTINEL)) continue;
    const e = encode(f, d);
    if (!e.ok) {
      p.errors[f.path] = e.error;
      continue;
    }
    const cur = stored[f.key];
    if (!f.secret && same(f, cur, e.value)) continue;
    (p.doc[f.ns] ??= {})[f.key] = e.value;
    if (f.restart) p.restart = true;
  }
  return p;
}

function same(f: Field, cur: unknown, next: unknown): boolean {
  if (f.kind === 'table') return serializeTable(f.columns, parseTable(cur)) === next;
  // A shown value read back through the inverse can differ from the stored one in the last
  // bit: what counts is whether the person changed what they saw.
  if (typeof cur === 'number' && typeof next === 'number') return cur === next || toShown(f, cur) === toShown(f, next);
  return cur === next;
}

/** exportDoc is the configuration document as GET /config gave it (secrets stay the sentinel,
 * so the file can be imported unchanged); importDoc drops readOnly and unknown members. */
export function importDoc(sections: Section[], doc: unknown): { doc: Record<string, Record<string, unknown>>; skipped: string[] } {
  const out: Record<string, Record<string, unknown>> = {};
  const skipped: string[] = [];
  if (!isObj(doc)) return { doc: out, skipped: ['(not a configuration document)'] };
  for (const [ns, keys] of Object.entries(doc)) {
    const sec = sections.find((s) => s.ns === ns);
    if (!sec || !isObj(keys)) {
      skipped.push(ns);
      continue;
    }
    const fields = new Map(sec.groups.flatMap((g) => g.fields).map((f) => [f.key, f]));
    for (const [key, v] of Object.entries(keys)) {
      const f = fields.get(key);
      if (!f || f.readOnly || f.movesTo) {
        if (key !== 'config_version') skipped.push(`${ns}.${key}`);
        continue;
      }
      (out[ns] ??= {})[key] = v;
    }
  }
  return { doc: out, skipped };
}

/** errorPath maps a validation error's `path` to a field path, a section or the document. */
export function errorTarget(path: unknown): { field?: string; ns?: string } {
  if (typeof path !== 'string' || path === '') return {};
  const i = path.indexOf('.');
  return i < 0 ? { ns: path } : { ns: path.slice(0, i), field: path };
}
