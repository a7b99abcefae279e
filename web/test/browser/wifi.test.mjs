// The WiFi page against the real station manager and the simulated board's radio: the setup
// portal shown while no network is configured, a busy radio refusing a scan, a scan and a
// pick into a slot, the slot order, and a fault played by the access point showing its
// reason live from the `wifi` event.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { session, shot, until, useDevice } from './harness.mjs';

const MARINA = { ssid: 'Marina', psk: 'mooring-line-7' };
const FUEL = { ssid: 'Fuel Dock', psk: 'diesel-only' };
let dev, browser;
useDevice((d, b) => ([dev, browser] = [d, b]));

const wifiConfig = async () => (await dev.api('GET', '/config?ns=wifi')).body.wifi;

test('WiFi: the portal, a scan picked into slots, the slot order, a fault live', async () => {
  const { page, errors, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/wifi' });
  const status = page.getByTestId('wifi-status');
  const portal = page.getByTestId('portal');

  // No network configured: the station is unconfigured and the portal is up at once.
  await status.getByText('unconfigured').waitFor();
  await portal.getByText('yes', { exact: true }).waitFor();
  await portal.getByText(dev.portalIP).waitFor();
  const ps = (await dev.api('GET', '/wifi/status')).body.portal;
  await portal.getByText(ps.ssid, { exact: true }).waitFor();
  assert.equal(ps.clients, 0);
  await portal.getByRole('definition').filter({ hasText: /^0$/ }).waitFor();
  await shot(page, 'wifi', 'portal');

  // A radio that cannot scan now answers 409: the page says so.
  await dev.board('wifi', 'scan-busy', 'on');
  await page.getByRole('button', { name: 'Scan' }).click();
  await page.getByText('The radio is busy and cannot scan now; try again in a moment.').waitFor();
  await dev.board('wifi', 'scan-busy', 'off');

  // A second access point comes in range; a scan lists both.
  await dev.board('wifi', 'ap', 'add', '--ssid', FUEL.ssid, '--psk', FUEL.psk, '--rssi', '-70', '--channel', '11');
  await page.getByRole('button', { name: 'Scan' }).click();
  const nets = page.locator('ul.nets');
  await nets.getByRole('button', { name: MARINA.ssid }).waitFor();
  await nets.getByRole('button', { name: FUEL.ssid }).waitFor();
  await nets.getByText('-70 dBm, ch 11, wpa2').waitFor();
  assert.equal((await dev.api('GET', '/wifi/scan')).body.results.length, 2);

  // Pick Marina into slot 0 and Fuel Dock into slot 1, each with its password.
  await page.getByRole('radio').nth(0).check();
  await nets.getByRole('button', { name: MARINA.ssid }).click();
  await page.getByLabel('Password for slot 0').fill(MARINA.psk);
  await page.getByRole('radio').nth(1).check();
  await nets.getByRole('button', { name: FUEL.ssid }).click();
  await page.getByLabel('Password for slot 1').fill(FUEL.psk);
  await page.getByRole('button', { name: 'Save networks' }).click();
  await page.getByText('Networks saved.').waitFor();
  let w = await wifiConfig();
  assert.deepEqual([w.ssid0, w.psk0, w.ssid1, w.psk1], [MARINA.ssid, '********', FUEL.ssid, '********']);

  // The station joins slot 0 and the portal goes down, live.
  await status.getByText('connected', { exact: true }).waitFor();
  await status.getByText('Marina (slot 0)').waitFor();
  await status.getByText('-60 dBm, channel 6').waitFor();
  await portal.getByText('no', { exact: true }).waitFor();
  await shot(page, 'wifi', 'connected');

  // Slot order: Fuel Dock moves up. Stored passwords are never read back, so a moved slot
  // asks for its password again before anything is written.
  await page.getByRole('button', { name: 'Move slot 1 up' }).click();
  await page.getByRole('button', { name: 'Save networks' }).click();
  await page.getByText('Retype the password of slot 0 (Fuel Dock): it moved.').waitFor();
  w = await wifiConfig();
  assert.equal(w.ssid0, MARINA.ssid, 'nothing written before the passwords are retyped');
  await page.getByRole('radio').nth(0).check();
  await page.getByLabel('Password for slot 0').fill(FUEL.psk);
  await page.getByRole('radio').nth(1).check();
  await page.getByLabel('Password for slot 1').fill(MARINA.psk);
  await page.getByRole('button', { name: 'Save networks' }).click();
  await page.getByText('Networks saved.').waitFor();
  w = await wifiConfig();
  assert.deepEqual([w.ssid0, w.ssid1], [FUEL.ssid, MARINA.ssid]);
  // The live connection is kept (its network is still listed, unchanged), now as slot 1.
  await status.getByText('Marina (slot 1)').waitFor();
  assert.equal((await dev.api('GET', '/wifi/status')).body.state, 'connected');

  // The access point takes the address away: the reason arrives with the `wifi` event.
  await dev.board('wifi', 'ap', 'fault', '--ssid', MARINA.ssid, '--fault', 'no_ip');
  await status.getByText('IP address lost (1003)').waitFor();
  await status.getByText('connected', { exact: true }).waitFor({ state: 'detached' });
  await shot(page, 'wifi', 'fault');
  assert.deepEqual(errors, []);
  await ctx.close();
});

test('WiFi at 360 px: no sideways scrolling', async () => {
  const { page, ctx } = await session(browser, dev, { width: 360, height: 740 }, { skipSetup: true, hash: '#/wifi' });
  await page.getByTestId('wifi-status').waitFor();
  await page.getByRole('button', { name: 'Scan' }).click();
  await page.locator('ul.nets').getByRole('button', { name: MARINA.ssid }).waitFor();
  await until('the page laid out', async () => (await page.getByText('Loading…').count()) === 0);
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 360, `the WiFi page is ${width} px wide at 360`);
  await shot(page, 'wifi', 'mobile-360');
  await ctx.close();
});
