// The configuration page against a real device: a refused value then a good one (checked in
// the page, and refused by the device on the field its `path` names), a secret set and never
// shown, a restart-required change with the reboot offered and the event stream coming back
// after the reboot, and export.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { session, shot, until, useDevice } from './harness.mjs';

let dev, browser;
useDevice((d, b) => ([dev, browser] = [d, b]));

const field = (page, path) => page.locator(`[data-field="${path}"]`);

test('a value out of range is refused on its field, then a good value is saved', async () => {
  const { page, errors, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/config' });
  await page.getByTestId('ns-httpd').waitFor();
  const ttl = field(page, 'httpd.session_ttl_s');
  await ttl.locator('label').getByText('(s)').waitFor(); // the unit
  await ttl.locator('input').fill('10');
  await ttl.getByTestId('field-error').getByText('Between 60 and 2592000.').waitFor();
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('Fix the marked fields; nothing was sent.').waitFor();
  await shot(page, 'config', 'validation-error');
  assert.equal((await dev.api('GET', '/config?ns=httpd')).body.httpd.session_ttl_s, 86400);

  await ttl.locator('input').fill('3600');
  assert.equal(await ttl.getByTestId('field-error').count(), 0);
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByTestId('saved').getByText('httpd.session_ttl_s').waitFor();
  assert.equal((await dev.api('GET', '/config?ns=httpd')).body.httpd.session_ttl_s, 3600);

  // A pattern is checked in the page before anything is sent.
  await page.locator('[data-ns="net"]').click();
  const host = field(page, 'net.hostname');
  await host.locator('input').fill('bad name!');
  await host.getByTestId('field-error').getByText('Not in the expected format.').waitFor();
  await page.getByRole('button', { name: 'Undo changes' }).click();

  // An enum is a select of its values.
  await page.locator('[data-ns="ota"]').click();
  const src = field(page, 'ota.manifest_src').locator('select');
  assert.deepEqual(await src.locator('option').allTextContents(), ['url', 'signalk']);
  await src.selectOption('signalk');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByTestId('saved').getByText('ota.manifest_src').waitFor();
  assert.equal((await dev.api('GET', '/config?ns=ota')).body.ota.manifest_src, 'signalk');
  assert.deepEqual(errors, []);
  await ctx.close();
});

test('a document the device refuses shows the refusal on the field its path names', async () => {
  const { page, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/config' });
  await page.getByTestId('ns-httpd').waitFor();
  await page.locator('[data-ns="power"]').click();
  // The import is sent as it is; the device's 400 names power.interval_s.
  await page.getByTestId('import').setInputFiles({ name: 'bad.json', mimeType: 'application/json', buffer: Buffer.from('{"power":{"interval_s":5}}') });
  await page.getByText(/Import refused: validation/).waitFor();
  const f = field(page, 'power.interval_s');
  await f.getByTestId('field-error').waitFor();
  assert.equal(await f.locator('input').getAttribute('aria-invalid'), 'true');
  await shot(page, 'config', 'device-refused');
  await ctx.close();
});

test('a secret is set, shown as set, never revealed, and exported as the sentinel', async () => {
  const { page, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/config' });
  await page.getByTestId('ns-httpd').waitFor();
  await page.locator('[data-ns="wifi"]').click();
  await page.getByRole('tab', { name: 'Networks' }).click();
  const psk = field(page, 'wifi.psk0');
  await psk.getByTestId('secret-state').getByText('not set').waitFor();
  await psk.locator('input').fill('short');
  await psk.getByTestId('field-error').waitFor();
  await psk.locator('input').fill('correct-horse-battery');
  await field(page, 'wifi.ssid0').locator('input').fill('Marina');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByTestId('saved').waitFor();
  await psk.getByTestId('secret-state').getByText('set', { exact: true }).waitFor();
  assert.equal(await psk.locator('input').inputValue(), '');
  assert.equal(await psk.locator('input').getAttribute('type'), 'password');
  assert.ok(!(await page.content()).includes('correct-horse-battery'), 'the secret is nowhere in the page');
  assert.equal((await dev.api('GET', '/config?ns=wifi')).body.wifi.psk0, '********');
  await shot(page, 'config', 'secret-set');

  const [dl] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export' }).click()]);
  const doc = JSON.parse(await readFile(await dl.path(), 'utf8'));
  assert.equal(doc.wifi.psk0, '********');
  assert.equal(doc.wifi.ssid0, 'Marina');
  // Importing the export unchanged changes nothing (the sentinel leaves the secret alone).
  await page.getByTestId('import').setInputFiles({ name: 'export.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(doc)) });
  await page.getByText('Imported: 0 keys changed').waitFor();
  await ctx.close();
});

test('a restart-required change offers a reboot; the event stream comes back after it', async () => {
  const { page, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/config' });
  await page.getByTestId('ns-httpd').waitFor();
  await page.locator('[data-ns="net"]').click();
  const host = field(page, 'net.hostname');
  await host.getByText('restart').waitFor();
  await host.locator('input').fill('boat-1');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('A changed setting takes effect after a reboot.').waitFor();
  await shot(page, 'config', 'reboot-offer');
  const before = (await dev.api('GET', '/system/info')).body;
  await page.getByRole('button', { name: 'Reboot now' }).click();
  await page.getByText('Rebooting…').waitFor();
  // The stream drops with the old app and the page reconnects to the new one by itself.
  await until('the stream dropped', async () => (await page.getByTestId('link').textContent()) !== 'live', 20000);
  await until('the device rebooted', async () => {
    const r = await dev.api('GET', '/system/info');
    return r.status === 200 && r.body.reset_reason === 'software' && r.body.uptime_s <= before.uptime_s + 5;
  });
  await page.getByTestId('link').getByText('live').waitFor({ timeout: 30000 });
  await page.goto(dev.url + '/#/dashboard');
  await page.getByTestId('identity').getByText('boat-1').waitFor();
  await ctx.close();
});
