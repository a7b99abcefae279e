// The Updates page and the Power card against a real device: the status as GET /ota/status
// has it, checks (without a manifest, then with one the test serves), an image the device
// refuses with its error shown, installed from the manifest and from a URL, then a whole install
// from a URL the test serves on loopback (a signed image of bin/devhost, made by `make
// web-fixtures`): the progress bar from the `ota` events while the test holds the download
// half way, the reboot into the other slot, confirm, and a roll back to the first slot.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { after, test } from 'node:test';
import { FIRMWARE, session, shot, until, useDevice } from './harness.mjs';

let dev, browser, server, img, release;
const held = {}; // resolved once the device has asked for the held image
const base = () => `http://127.0.0.1:${server.address().port}`;

/** serveImages serves the images and the manifest the tests install from. */
async function serveImages() {
  img = await readFile(FIRMWARE);
  let gate;
  release = new Promise((r) => (gate = r));
  release.open = gate;
  held.asked = new Promise((r) => (held.ask = r));
  server = createServer((req, res) => {
    if (req.url.startsWith('/bad.img')) {
      // The whole image with one byte of its signature changed.
      const bad = Buffer.from(img);
      bad[bad.length - 10] ^= 0xff;
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': bad.length });
      res.end(bad);
      return;
    }
    if (req.url === '/manifest.json') {
      // A newer build for this board whose image (relative to the manifest) is the refused one.
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ schema: 1, builds: [{ version: '9.9.9', target: 'esp32s3', url: 'bad.img', size: img.length, notes: 'Faster Signal K reconnect.', date: '2026-11-20' }] }));
      return;
    }
    if (req.url === '/fw.img') {
      // Half the image, then the rest once the test has seen the progress bar.
      const half = Math.floor(img.length / 2);
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': img.length });
      res.write(img.subarray(0, half));
      held.ask();
      release.then(() => res.end(img.subarray(half)));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
}

// A download the test holds ends before the device stops.
after(() => release?.open());
// The device confirms a new image only when told to, so the test sees it pending.
useDevice((d, b) => ([dev, browser] = [d, b]), {
  args: ['--ota-confirm-uptime', '1h'],
  before: serveImages,
  after: () => new Promise((r) => (server ? server.close(r) : r())),
});

const status = async () => (await dev.api('GET', '/ota/status')).body;

test('the Power card shows GET /power and follows the mode', async () => {
  const { page, errors, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/system' });
  const card = page.getByRole('region', { name: 'Power' }).getByTestId('power');
  const p = (await dev.api('GET', '/power')).body;
  assert.equal(p.decision, 'off');
  await card.getByText('off (off)').waitFor();
  await card.getByText(`${p.interval_s} s`).waitFor();
  await card.getByText('not a timer wake').waitFor();
  // The duty cycle on, with an awake window longer than this test: awake, and the deadline.
  assert.equal((await dev.api('PUT', '/config', { power: { mode: 'cycle', window_s: 86400 } })).status, 200);
  await card.getByText('awake (window)').waitFor();
  const q = (await dev.api('GET', '/power')).body;
  assert.equal(q.deadline_ms, (86400 + 30) * 1000, 'window_s + awake_max_s (30 s by default)');
  await card.getByText('uptime 1d 0h 0m 30s').waitFor();
  await card.getByText('none', { exact: true }).waitFor();
  await shot(page, 'pages', 'system-power');
  assert.equal((await dev.api('PUT', '/config', { power: { mode: 'off' } })).status, 200);
  await card.getByText('off (off)').waitFor();
  assert.deepEqual(errors, []);
  await ctx.close();
});

test('updates: the status as the device has it, a check, a newer build refused from the manifest and a URL', async () => {
  const st = await status();
  assert.equal(st.state, 'idle');
  assert.equal(st.running.slot, 0);
  const { page, errors, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/updates' });
  const ota = page.getByTestId('ota');
  await ota.getByText(`${st.running.version} (slot 0, confirmed)`).waitFor();
  await ota.getByText('idle', { exact: true }).waitFor();
  await ota.getByText('empty', { exact: true }).waitFor();
  // Confirmed already: nothing to confirm; the other slot is empty: nothing to roll back to.
  assert.equal(await page.getByRole('button', { name: 'Confirm this build' }).count(), 0);
  assert.equal(await page.getByRole('button', { name: 'Roll back' }).isDisabled(), true);
  await page.getByRole('region', { name: 'Available' }).getByText('No newer build known.').waitFor();

  // A check with no manifest configured fails with the device's words.
  await page.getByRole('button', { name: 'Check now' }).click();
  await page.getByText('Checking the manifest.').waitFor();
  await ota.getByText('check: ota.manifest_url is not set').waitFor();
  await ota.getByText('failed', { exact: true }).waitFor();

  // With a manifest: the newer build with its notes, then installed from the manifest; its
  // image's signature does not match, so the device refuses it and nothing changes.
  assert.equal((await dev.api('PUT', '/config', { ota: { manifest_url: `${base()}/manifest.json` } })).status, 200);
  await page.getByRole('button', { name: 'Check now' }).click();
  const avail = page.getByRole('region', { name: 'Available' });
  await avail.getByText('9.9.9', { exact: true }).waitFor();
  await avail.getByText('Faster Signal K reconnect.').waitFor();
  await avail.getByText('2026-11-20').waitFor();
  await ota.getByText('available', { exact: true }).waitFor();
  await shot(page, 'pages', 'updates-available');
  await avail.getByRole('button', { name: 'Install 9.9.9' }).click();
  await page.getByText('Installing from the manifest.').waitFor();
  await ota.getByText('image rejected: bad signature or corrupt').waitFor();
  await ota.getByText('failed', { exact: true }).waitFor();
  await ota.getByText(`${base()}/bad.img`).waitFor();

  // The same from a URL typed in.
  await page.getByLabel('Install from a URL').fill(`${base()}/bad.img?typed`);
  await page.getByRole('button', { name: 'Install', exact: true }).click();
  await page.getByText('Installing from the URL.').waitFor();
  await ota.getByText(`${base()}/bad.img?typed`).waitFor();
  await ota.getByText('image rejected: bad signature or corrupt').waitFor();
  await ota.getByText('failed', { exact: true }).waitFor();
  await ota.getByText(`${st.running.version} (slot 0, confirmed)`).waitFor();
  const after = await status();
  assert.equal(after.state, 'failed');
  assert.equal(after.error, 'image rejected: bad signature or corrupt');
  assert.equal(after.other_version, null);
  await shot(page, 'pages', 'updates-refused');

  await page.goto(dev.url + '/#/dashboard');
  const card = page.getByRole('region', { name: 'Updates' });
  await card.getByText('failed', { exact: true }).waitFor();
  await card.getByText(st.running.version, { exact: true }).waitFor();
  assert.deepEqual(errors, []);
  await ctx.close();
});

test('updates: install from a URL with progress, confirm, roll back', async () => {
  const before = await status();
  const v = before.running.version;
  const { page, errors, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/updates' });
  const ota = page.getByTestId('ota');
  await ota.getByText(`${v} (slot 0, confirmed)`).waitFor();
  await page.getByLabel('Install from a URL').fill(`${base()}/fw.img`);
  await page.getByRole('button', { name: 'Install', exact: true }).click();
  await held.asked;
  // The device has half the image: the bar shows a part, from the `ota` events.
  const bar = page.getByRole('progressbar', { name: 'Download' });
  await until('the progress bar part way', async () => {
    const n = Number(await bar.getAttribute('aria-valuenow', { timeout: 1000 }));
    return n > 0 && n < 100;
  });
  await ota.getByText('downloading', { exact: true }).waitFor();
  await ota.getByText(`${base()}/fw.img`).waitFor();
  await shot(page, 'pages', 'updates-downloading');
  release.open();

  // Verified, ready, the reboot: the page reconnects and shows the new slot, unconfirmed.
  await ota.getByText(`${v} (slot 1, not yet confirmed)`).waitFor({ timeout: 60000 });
  await ota.getByText('pending_verify', { exact: true }).waitFor();
  const pending = await status();
  assert.equal(pending.running.slot, 1);
  assert.equal(pending.running.confirmed, false);
  await shot(page, 'pages', 'updates-pending');

  await page.getByRole('button', { name: 'Confirm this build' }).click();
  await page.getByText('Confirmed.', { exact: true }).waitFor();
  await ota.getByText(`${v} (slot 1, confirmed)`).waitFor();
  assert.equal((await status()).running.confirmed, true);
  await ota.getByText(`${v} (valid)`).waitFor();

  // Roll back behind the browser's confirmation: the device reboots into slot 0.
  page.once('dialog', (d) => void d.accept());
  await page.getByRole('button', { name: 'Roll back' }).click();
  await page.getByText('Rolling back.').waitFor();
  await ota.getByText(`${v} (slot 0, confirmed)`).waitFor({ timeout: 60000 });
  await ota.getByText('yes: the other slot holds an image that failed').waitFor();
  const back = await status();
  assert.equal(back.running.slot, 0);
  assert.equal(back.running.rolled_back, true);
  await ota.getByText(`${back.other_version} (${back.other_state})`).waitFor();
  await shot(page, 'pages', 'updates');
  assert.deepEqual(errors, []);
  await ctx.close();
});
