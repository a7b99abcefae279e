// Sign-in and sign-out, the first-run setup (set a key, join the simulated board's access
// point), a wrong key, and the throttle's wait shown after five wrong keys.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { session, shot, until, useDevice } from './harness.mjs';

const KEY = 'harbour-master-7';
let dev, browser;
useDevice((d, b) => ([dev, browser] = [d, b]));

test('first run: set a key, join WiFi, then sign out and in again', async () => {
  const { page, errors, ctx } = await session(browser, dev);
  await page.getByRole('heading', { name: 'Set up this device' }).waitFor();
  // No network is configured yet: the station says so.
  const st = page.getByTestId('setup-wifi');
  await st.getByText('unconfigured').waitFor();
  await shot(page, 'auth', 'setup');
  // Join WiFi: scan, pick the access point in range, its password, Join; the page follows the
  // station to connected from the `wifi` event.
  await page.getByRole('button', { name: 'Scan' }).click();
  await page.getByRole('button', { name: 'Marina' }).click();
  assert.equal(await page.getByLabel('Network name (SSID)').inputValue(), 'Marina');
  await page.getByLabel('Password', { exact: true }).fill('mooring-line-7');
  await page.getByRole('button', { name: 'Join' }).click();
  await page.getByText('Joined Marina.').waitFor();
  await st.getByText('connected', { exact: true }).waitFor();
  await st.getByText('127.0.0.1').waitFor();
  const ws = (await dev.api('GET', '/wifi/status')).body;
  assert.equal(ws.state, 'connected');
  assert.equal(ws.ssid, 'Marina');
  assert.equal((await dev.api('GET', '/net/status')).body.iface, 'wifi_sta');
  await shot(page, 'auth', 'setup-joined');

  await page.getByLabel('New key (8 to 64 characters)').fill(KEY);
  await page.getByLabel('The same key again').fill(KEY);
  await page.getByRole('button', { name: 'Set key' }).click();
  await page.getByText('Key set; this browser is signed in.').waitFor();
  assert.equal((await dev.api('GET', '/system/info')).status, 401, 'the key protects the API now');
  await page.getByRole('button', { name: 'Continue to the dashboard' }).click();
  await page.getByTestId('dashboard').waitFor();
  await page.getByTestId('link').getByText('live').waitFor();

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await shot(page, 'auth', 'sign-in');
  await page.getByLabel('API key').fill('not-the-key');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('Wrong key.').waitFor();
  await page.getByLabel('API key').fill(KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('dashboard').waitFor();
  await page.getByTestId('identity').getByText('devhost-sim').waitFor();
  assert.deepEqual(errors, []);
  await ctx.close();
});

test('the API key is changed from the system page; the browser stays signed in', async () => {
  const NEW = 'harbour-master-8';
  const { page, ctx } = await session(browser, dev, undefined, { hash: '#/system' });
  await page.getByLabel('API key').fill(KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  const card = page.getByRole('region', { name: 'API key' });
  await card.getByText('A key is set').waitFor();
  await card.getByLabel('New key (8 to 64 characters)').fill(NEW);
  await card.getByLabel('The same key again').fill(NEW);
  await card.getByRole('button', { name: 'Change key' }).click();
  await card.getByText('Key set; this browser is signed in with it.').waitFor();
  assert.equal((await dev.api('GET', '/system/info', undefined, KEY)).status, 401);
  assert.equal((await dev.api('GET', '/system/info', undefined, NEW)).status, 200);
  await page.goto(dev.url + '/#/health');
  await page.getByTestId('conditions').waitFor();
  await ctx.close();
});

test('a 401 anywhere returns to sign-in; the throttle shows the wait', async () => {
  const NEW = 'harbour-master-8', NEWER = 'harbour-master-9';
  const { page, ctx } = await session(browser, dev);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await page.getByLabel('API key').fill(NEW);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('dashboard').waitFor();
  // The session ends on the device's side (the key is changed by another client): the next
  // request answers 401 and the page shows the sign-in again.
  assert.equal((await dev.api('PUT', '/config', { httpd: { api_key: NEWER } }, NEW)).status, 200);
  await page.goto(dev.url + '/#/health');
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();

  // Wrong keys from another client until the device throttles (the counter is global).
  await until('the throttle on', async () => (await dev.api('GET', '/system/info', undefined, 'wrong-key-x')).status === 429);
  await page.getByLabel('API key').fill(NEWER);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('throttle').waitFor();
  const text = await page.getByTestId('throttle').textContent();
  assert.match(text, /try again in \d+ s/);
  assert.equal(await page.getByRole('button', { name: 'Sign in' }).isDisabled(), true);
  await shot(page, 'auth', 'throttled');
  await ctx.close();
});
