import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GENERAL, SENTINEL, buildPatch, cellValue, draftOf, encode, errorTarget, importDoc, parseSchema, parseTable, serializeTable, toShown, toStored, type Field } from '../../src/schema';

// A schema in the device's shape (host/config/schema.go): x members under x-dev-display.
const schema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    httpd: {
      type: 'object',
      title: 'Web server',
      'x-dev-version': 1,
      properties: {
        port: { type: 'integer', title: 'HTTP port', default: 80, minimum: 1, maximum: 65535, 'x-dev-restartRequired': true },
        api_key: { type: 'string', title: 'API key', maxLength: 64, pattern: '^(?:.{8,64})?$', not: { minLength: 1, maxLength: 7 }, format: 'password', writeOnly: true, 'x-dev-secret': true },
      },
    },
    nav: {
      type: 'object',
      title: 'Navigation',
      'x-dev-version': 3,
      properties: {
        heading: { type: 'number', title: 'Heading offset', default: 0, minimum: -Math.PI, maximum: Math.PI, 'x-dev-unit': 'deg', 'x-dev-display': { displayMultiplier: 180 / Math.PI } },
        temp: { type: 'number', title: 'Alarm temperature', default: 300, minimum: 273.15, maximum: 373.15, 'x-dev-unit': '°C', 'x-dev-display': { displayOffset: -273.15 }, 'x-dev-group': 'Alarms' },
        speed: { type: 'integer', title: 'Speed', default: 5, minimum: 0, maximum: 100, 'x-dev-display': { displayMultiplier: 1.94384 }, 'x-dev-group': 'Alarms' },
        mode: { type: 'string', title: 'Mode', default: 'auto', enum: ['auto', 'manual'], maxLength: 6 },
        serial: { type: 'string', title: 'Serial', default: '', readOnly: true },
        mac: { type: 'string', title: 'MAC', default: '', maxLength: 17, pattern: '^(?:[0-9a-f]{2}(?::[0-9a-f]{2}){5})?$' },
        old: { type: 'string', title: 'Old name', default: '', deprecated: true, 'x-dev-movesTo': 'nav.mac' },
      },
    },
    f_app: {
      type: 'object',
      title: 'Switch bank',
      'x-dev-runtime': true,
      properties: {
        switches: { type: 'string', title: 'Switches', default: '[]', maxLength: 3999, 'x-dev-display': { format: 'table', columns: ['name', 'pin', 'default'] } },
        ca: { type: 'string', title: 'CA', maxLength: 8, 'x-dev-type': 'blob', 'x-dev-maxBytes': 6 },
      },
    },
  },
};

const sections = parseSchema(schema);
const field = (path: string): Field => {
  const f = sections.flatMap((s) => s.groups.flatMap((g) => g.fields)).find((x) => x.path === path);
  assert.ok(f, path);
  return f;
};

describe('parseSchema', () => {
  it('keeps namespaces in order, with runtime and version', () => {
    assert.deepEqual(
      sections.map((s) => [s.ns, s.title, s.version, s.runtime]),
      [
        ['httpd', 'Web server', 1, false],
        ['nav', 'Navigation', 3, false],
        ['f_app', 'Switch bank', 0, true],
      ],
    );
  });
  it('groups keys by x-dev-group, ungrouped first as General', () => {
    const nav = sections[1];
    assert.deepEqual(
      nav.groups.map((g) => [g.name, g.fields.map((f) => f.key)]),
      [
        [GENERAL, ['heading', 'mode', 'serial', 'mac']],
        ['Alarms', ['temp', 'speed']],
      ],
    );
  });
  it('chooses the control kind from the schema', () => {
    const kinds = Object.fromEntries(['httpd.port', 'httpd.api_key', 'nav.heading', 'nav.mode', 'nav.mac', 'f_app.switches', 'f_app.ca'].map((p) => [p, field(p).kind]));
    assert.deepEqual(kinds, { 'httpd.port': 'int', 'httpd.api_key': 'secret', 'nav.heading': 'float', 'nav.mode': 'enum', 'nav.mac': 'string', 'f_app.switches': 'table', 'f_app.ca': 'blob' });
    assert.equal(field('httpd.port').restart, true);
    assert.equal(field('nav.serial').readOnly, true);
    assert.equal(field('httpd.api_key').shortMax, 7);
    assert.deepEqual(field('f_app.switches').columns, ['name', 'pin', 'default']);
    assert.equal(field('nav.heading').unit, 'deg');
  });
  it('leaves out keys that moved elsewhere', () => {
    assert.ok(!sections[1].groups.some((g) => g.fields.some((f) => f.key === 'old')));
  });
  it('reads nothing from a document that is not a schema', () => {
    assert.deepEqual(parseSchema(null), []);
    assert.deepEqual(parseSchema({ properties: { a: 5 } }), []);
  });
});

describe('presentation transform', () => {
  const cases: [string, number, number][] = [
    ['nav.heading', Math.PI / 2, 90],
    ['nav.heading', -Math.PI / 4, -45],
    ['nav.temp', 293.15, 20],
    ['nav.temp', 273.15, 0],
    ['httpd.port', 8080, 8080],
  ];
  for (const [path, stored, shown] of cases) {
    it(`${path}: ${stored} shows as ${shown} and writes back exactly`, () => {
      const f = field(path);
      assert.equal(toShown(f, stored), shown);
      assert.ok(Math.abs(toStored(f, shown) - stored) < 1e-9);
      assert.equal(toShown(f, toStored(f, shown)), shown);
    });
  }
  it('an integer key is written back as an integer', () => {
    const f = field('nav.speed');
    assert.equal(toShown(f, 10), 19.4384);
    assert.equal(toStored(f, 19.4384), 10);
    assert.ok(Number.isInteger(toStored(f, 20)));
  });
  it('range messages are in shown units', () => {
    const r = encode(field('nav.temp'), '150');
    assert.deepEqual(r, { ok: false, error: 'Between 0 and 100.' });
    assert.deepEqual(encode(field('nav.temp'), '25'), { ok: true, value: 298.15 });
  });
});

describe('encode checks a draft like the schema says', () => {
  const cases: [string, string | boolean, boolean, unknown?][] = [
    ['httpd.port', '8080', true, 8080],
    ['httpd.port', '0', false],
    ['httpd.port', '65536', false],
    ['httpd.port', '80.5', false],
    ['httpd.port', 'eighty', false],
    ['httpd.port', '', false],
    ['httpd.api_key', 'short', false],
    ['httpd.api_key', 'long-enough', true, 'long-enough'],
    ['httpd.api_key', '', true, ''],
    ['nav.mode', 'manual', true, 'manual'],
    ['nav.mode', 'other', false],
    ['nav.mac', 'aa:bb:cc:dd:ee:ff', true, 'aa:bb:cc:dd:ee:ff'],
    ['nav.mac', 'aa:bb', false],
    ['nav.mac', 'aa:bb:cc:dd:ee:fff', false],
    ['f_app.ca', 'QUJD', true, 'QUJD'],
    ['f_app.ca', 'QUJDREVGR0g=', false],
  ];
  for (const [path, draft, ok, value] of cases) {
    it(`${path} ${JSON.stringify(draft)} is ${ok ? 'accepted' : 'refused'}`, () => {
      const r = encode(field(path), draft);
      assert.equal(r.ok, ok, JSON.stringify(r));
      if (ok && r.ok) assert.deepEqual(r.value, value);
    });
  }
  it('counts string length in UTF-8 bytes, as the device does', () => {
    const f: Field = { ...field('nav.mac'), pattern: undefined, maxLength: 4 };
    assert.equal(encode(f, 'abcd').ok, true);
    assert.equal(encode(f, 'äbc').ok, true);
    assert.equal(encode(f, 'äöc').ok, false);
  });
});

describe('tables', () => {
  it('parses rows and writes exactly the named columns in order', () => {
    const rows = parseTable('[{"pin":4,"name":"anchor","extra":1}]');
    assert.equal(serializeTable(['name', 'pin', 'default'], rows), '[{"name":"anchor","pin":4,"default":null}]');
  });
  it('reads anything but an array of objects as no rows', () => {
    assert.deepEqual(parseTable('{}'), []);
    assert.deepEqual(parseTable('not json'), []);
    assert.deepEqual(parseTable(''), []);
    assert.deepEqual(parseTable('[1,{"a":1}]'), [{ a: 1 }]);
  });
  it('reads a cell as null, boolean, number or string', () => {
    assert.deepEqual(['', 'true', 'false', '12', '-1.5', '1e3', 'deck', '012', ' on '].map(cellValue), [null, true, false, 12, -1.5, 1000, 'deck', '012', ' on ']);
  });
  it('refuses a table over its byte limit', () => {
    const f: Field = { ...field('f_app.switches'), maxLength: 20 };
    assert.equal(encode(f, [{ name: 'a-long-switch-name', pin: 1 }]).ok, false);
  });
});

describe('buildPatch', () => {
  const nav = sections[1].groups.flatMap((g) => g.fields);
  const stored = { heading: 0, temp: 300, speed: 5, mode: 'auto', serial: 'X1', mac: '' };
  it('sends only changed keys, never readOnly ones', () => {
    const drafts = Object.fromEntries(nav.map((f) => [f.path, draftOf(f, (stored as Record<string, unknown>)[f.key])]));
    drafts['nav.mode'] = 'manual';
    drafts['nav.serial'] = 'tampered';
    drafts['nav.heading'] = '90';
    const p = buildPatch(nav, stored, drafts);
    assert.deepEqual(p.errors, {});
    assert.deepEqual(Object.keys(p.doc.nav).sort(), ['heading', 'mode']);
    assert.ok(Math.abs((p.doc.nav.heading as number) - Math.PI / 2) < 1e-12);
    assert.equal(p.restart, false);
  });
  it('an untouched transformed value is not sent again', () => {
    const heading = field('nav.heading');
    for (const v of [Math.PI / 3, 0.1, -2.5, 1e-7]) {
      assert.deepEqual(buildPatch([heading], { heading: v }, { [heading.path]: draftOf(heading, v) }).doc, {}, String(v));
    }
  });
  it('reports field errors by path and sends nothing for them', () => {
    const p = buildPatch(nav, stored, { 'nav.mac': 'zz' });
    assert.deepEqual(Object.keys(p.errors), ['nav.mac']);
    assert.deepEqual(p.doc, {});
  });
  it('leaves an untouched secret alone and never shows it', () => {
    const httpd = sections[0].groups.flatMap((g) => g.fields);
    const key = field('httpd.api_key');
    assert.equal(draftOf(key, SENTINEL), '');
    assert.deepEqual(buildPatch(httpd, { port: 80, api_key: SENTINEL }, { 'httpd.api_key': '' }).doc, {});
    assert.deepEqual(buildPatch(httpd, { port: 80, api_key: SENTINEL }, { 'httpd.api_key': SENTINEL }).doc, {});
    assert.deepEqual(buildPatch(httpd, { port: 80, api_key: SENTINEL }, { 'httpd.api_key': 'new-secret-1' }).doc, { httpd: { api_key: 'new-secret-1' } });
  });
  it('marks a restart-required change', () => {
    const httpd = sections[0].groups.flatMap((g) => g.fields);
    const p = buildPatch(httpd, { port: 80, api_key: '' }, { 'httpd.port': '8080' });
    assert.deepEqual(p.doc, { httpd: { port: 8080 } });
    assert.equal(p.restart, true);
  });
  it('compares tables by content, not by spelling', () => {
    const sw = field('f_app.switches');
    const stored = { switches: '[{"name":"a","pin":1,"default":null}]' };
    assert.deepEqual(buildPatch([sw], stored, { [sw.path]: [{ pin: 1, name: 'a' }] }).doc, {});
    assert.deepEqual(buildPatch([sw], stored, { [sw.path]: [{ name: 'a', pin: 2 }] }).doc, { f_app: { switches: '[{"name":"a","pin":2,"default":null}]' } });
  });
});

describe('import and errors', () => {
  it('drops readOnly, unknown and config_version members, keeps secrets as sent', () => {
    const r = importDoc(sections, { httpd: { port: 81, api_key: SENTINEL, config_version: 1 }, nav: { serial: 'x', mode: 'manual' }, gone: { a: 1 } });
    assert.deepEqual(r.doc, { httpd: { port: 81, api_key: SENTINEL }, nav: { mode: 'manual' } });
    assert.deepEqual(r.skipped, ['nav.serial', 'gone']);
  });
  it('maps a validation path to a field, a namespace or the document', () => {
    assert.deepEqual(errorTarget('httpd.port'), { ns: 'httpd', field: 'httpd.port' });
    assert.deepEqual(errorTarget('httpd'), { ns: 'httpd' });
    assert.deepEqual(errorTarget(''), {});
    assert.deepEqual(errorTarget(undefined), {});
  });
});
