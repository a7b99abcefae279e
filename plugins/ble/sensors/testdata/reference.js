'use strict';
// Runs bt-sensors-plugin-sk's own decoder classes on advertisements without a radio, as the
// reference for sensors_test.go. Reads a JSON array of cases on stdin:
//   [{"class": "RuuviTag", "adv": "<AD structures as hex>", "key": "<hex or empty>", "config": {...}}]
// and prints one JSON array: per case {"values": [{"path", "unit", "value"}], "error"}.
// Paths are relative to the sensor's prefix: what follows the last "{placeholder}" segment of
// the class's default Signal K path. Only paths that have a default are published by the
// plugin, so only those are reported; RSSI is not part of the advertising data.
const path = require('path');
const root = process.argv[2] && path.resolve(process.argv[2]);
if (!root) { console.error('usage: node reference.js <bt-sensors-plugin-sk folder>'); process.exit(2); }

// parseAD splits advertising data into the dictionaries BlueZ hands the plugin.
function parseAD(buf) {
  const props = { ManufacturerData: {}, ServiceData: {}, UUIDs: [] };
  let i = 0;
  while (i < buf.length) {
    const len = buf[i];
    if (len === 0) break;
    const type = buf[i + 1];
    const data = buf.subarray(i + 2, i + 1 + len);
    if (type === 0xff && data.length >= 2) {
      props.ManufacturerData[data.readUInt16LE(0)] = Buffer.from(data.subarray(2));
    } else if (type === 0x16 && data.length >= 2) {
      const u = data.readUInt16LE(0).toString(16).padStart(4, '0');
      props.ServiceData[`0000${u}-0000-1000-8000-00805f9b34fb`] = Buffer.from(data.subarray(2));
    } else if ((type === 0x02 || type === 0x03) && data.length >= 2) {
      for (let j = 0; j + 1 < data.length; j += 2) {
        props.UUIDs.push(`0000${data.readUInt16LE(j).toString(16).padStart(4, '0')}-0000-1000-8000-00805f9b34fb`);
      }
    } else if (type === 0x08 || type === 0x09) {
      props.Name = data.toString('utf8');
    }
    i += 1 + len;
  }
  return props;
}

function relative(p) {
  const segs = p.split('.');
  let last = -1;
  segs.forEach((s, k) => { if (s.startsWith('{')) last = k; });
  return segs.slice(last + 1).join('.');
}

// rawBTHome parses the BTHome service data with the plugin's own BTHome v2 parser and answers
// each object's id and undecorated value (integer, event code, boolean as 0/1, or text).
function rawBTHome(props) {
  const KaitaiStream = require(require.resolve('kaitai-struct/KaitaiStream', { paths: [root] }));
  const BTHomeServiceData = require(path.join(root, 'sensor_classes', 'BTHome', 'BTHomeServiceData.js'));
  const sd = props.ServiceData['0000fcd2-0000-1000-8000-00805f9b34fb'];
  const parsed = new BTHomeServiceData(new KaitaiStream(sd));
  return parsed.measurement.map((m) => {
    const d = m.data;
    let v = 'value' in d ? d.value : 'event' in d ? d.event : d[Object.keys(d).find((k) => !k.startsWith('_'))];
    if (v !== null && typeof v === 'object') v = 'value' in v ? v.value : v.intValue;
    return { id: m.objectId, value: v };
  });
}

async function run(c) {
  if (c.class === 'BTHomeServiceData') return rawBTHome(parseAD(Buffer.from(c.adv, 'hex')));
  const Cls = require(path.join(root, 'sensor_classes', c.class + '.js'));
  const props = parseAD(Buffer.from(c.adv, 'hex'));
  const d = new Cls(null, Object.assign({}, c.config || {}));
  d.currentProperties = props;
  d.debug = () => {};
  if (c.key) d.encryptionKey = c.key;
  if (Cls.name === 'VictronBatteryMonitor' && d.auxMode === undefined) {
    // The plugin reads the aux mode from the first decrypted advert at start-up.
    const md = props.ManufacturerData[0x02e1];
    d.auxMode = d.decrypt(md).readInt8(8) & 0x3;
  }
  await d.initSchema();
  const values = [];
  const paths = d.getPaths();
  for (const tag of Object.keys(paths)) {
    const p = paths[tag];
    if (tag === 'RSSI' || typeof p.default !== 'string') continue;
    d.on(tag, (v) => {
      if (v === undefined || v === null || (typeof v === 'number' && Number.isNaN(v))) return;
      values.push({ path: relative(p.default), unit: p.unit || '', value: v });
    });
  }
  d.propertiesChanged(props);
  return values;
}

(async () => {
  const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
  const out = [];
  for (const c of input) {
    try { out.push({ values: await run(c) }); } catch (e) { out.push({ values: [], error: String(e && e.message || e) }); }
  }
  process.stdout.write(JSON.stringify(out));
})();
