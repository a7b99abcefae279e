// The other pages against a real device: the dashboard following the event stream, the log
// tail, a drill appearing and clearing, Signal K and System, the keyboard, the night theme,
// and every page at 360 px wide without sideways scrolling. The device joins the simulated
// board's access point from its factory settings.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { session, shot, until, useDevice } from './harness.mjs';

const MARINA = { ssid: 'Marina', psk: 'mooring-line-7' };
let dev, browser;
// A 1 s policy tick expires a drill soon after its ttl.
useDevice((d, b) => ([dev, browser] = [d, b]), {
  factory: { wifi: { ssid0: MARINA.ssid, psk0: MARINA.psk } },
  args: ['--health-tick', '1s', '--debug-crash'],
});

const PAGES = ['dashboard', 'config', 'wifi', 'signalk', 'logs', 'health', 'updates', 'plugins', 'system'];

test('the dashboard follows the event stream', async () => {
  const { page, errors, ctx } = await session(browser, dev, undefined, { skipSetup: true });
  await page.getByTestId('dashboard').waitFor();
  const net = page.getByTestId('net');
  await net.getByText('up via wifi_sta').waitFor();
  await net.getByText('connected (Marina)').waitFor();
  // Ethernet is preferred over the station: the route moves to it and back.
  await dev.board('eth', 'up');
  await net.getByText('up via eth').waitFor();
  await dev.board('eth', 'down');
  await net.getByText('up via wifi_sta').waitFor();
  // The access point goes away: the route goes down.
  await dev.board('wifi', 'ap', 'remove', '--ssid', MARINA.ssid);
  await net.getByText('down', { exact: true }).waitFor();
  // netDown is logged, so the health card shows it without a reload.
  await page.getByTestId('dash-conditions').getByText('netDown').waitFor();
  await shot(page, 'pages', 'dashboard-net-down');
  await dev.board('wifi', 'ap', 'add', '--ssid', MARINA.ssid, '--psk', MARINA.psk, '--channel', '6', '--rssi', '-60');
  await net.getByText('up via wifi_sta').waitFor({ timeout: 60000 });
  await until('netDown cleared on the dashboard', async () => (await page.getByTestId('dash-conditions').getByText('netDown').count()) === 0);
  await shot(page, 'pages', 'dashboard');
  assert.deepEqual(errors, []);
  await ctx.close();
});

test('logs: live tail, pause, level per tag', async () => {
  const { page, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/logs' });
  const log = page.getByTestId('log');
  await log.getByText('main: boot reset_reason=poweron').waitFor();
  // A line the device logs now arrives through the `logs` event.
  assert.equal((await dev.api('POST', '/health/test', { key: 'test.tail', state: 'warn', message: 'tail-marker-1', ttl_s: 300 })).status, 200);
  await log.getByText('tail-marker-1').waitFor();
  await page.getByRole('button', { name: 'Pause' }).click();
  await dev.api('POST', '/health/test', { key: 'test.tail', state: 'warn', message: 'tail-marker-2', ttl_s: 300 });
  await until('the paused line logged', async () => JSON.stringify((await dev.api('GET', '/logs')).body.lines).includes('tail-marker-2'));
  assert.equal(await log.getByText('tail-marker-2').count(), 0, 'paused: no new line shown');
  await page.getByRole('button', { name: 'Resume' }).click();
  await log.getByText('tail-marker-2').waitFor();
  await dev.api('POST', '/health/test', { key: 'test.tail', state: 'normal' });
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: dev.url });
  await page.getByRole('button', { name: 'Copy' }).click();
  await page.getByText(/^Copied \d+ lines\.$/).waitFor();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert.ok(copied.includes('tail-marker-2') && copied.includes('main: boot reset_reason=poweron'), 'the shown lines are copied');

  await page.getByLabel('Tag (* for all)').fill('sk');
  await page.getByLabel('Level', { exact: true }).selectOption('debug');
  await page.getByRole('button', { name: 'Set level' }).click();
  await page.getByText('Level of sk is debug.').waitFor();
  await shot(page, 'pages', 'logs');
  await ctx.close();
});

test('health: a drill appears and clears by itself', async () => {
  const { page, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/health' });
  const table = page.getByTestId('conditions');
  await table.getByText('lowMemory').waitFor();
  await page.getByLabel('Key').fill('test.fire');
  await page.getByLabel('State').selectOption('alarm');
  await page.getByLabel('Message').fill('fire drill');
  await page.getByLabel('Expires after (s)').fill('3');
  await page.getByRole('button', { name: 'Run drill' }).click();
  const row = table.locator('tr[data-key="test.fire"]');
  await row.getByText('alarm').waitFor();
  await row.getByText('fire drill').waitFor();
  await shot(page, 'pages', 'health-drill');
  // The drill expires at a policy tick after 3 s; the page follows without a reload.
  await row.getByText('normal').waitFor({ timeout: 30000 });
  await ctx.close();
});

test('Signal K and System pages show the device state', async () => {
  const { page, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/signalk' });
  await page.getByTestId('sk-status').getByText('NO_SERVER').waitFor();
  await page.getByTestId('sk-explain').getByText('No server is known.').waitFor();
  await shot(page, 'pages', 'signalk');
  await page.goto(dev.url + '/#/system');
  await page.getByTestId('sysinfo').getByText('esp32s3 rev 0, 2 cores, 240 MHz').waitFor();
  await page.getByTestId('sysinfo').getByText('UI from storage').waitFor();
  assert.equal((await dev.api('GET', '/system/info')).body.ui_storage, true);
  // The factory reset needs the typed word.
  const reset = page.getByRole('button', { name: 'Factory reset' });
  assert.equal(await reset.isDisabled(), true);
  await page.getByLabel('Type erase to confirm').fill('eras');
  assert.equal(await reset.isDisabled(), true);
  await shot(page, 'pages', 'system');
  await ctx.close();
});

test('system: a crash leaves a core dump to read, download and erase', async () => {
  await dev.api('POST', '/system/crash').catch(() => {}); // the app panics on purpose
  await until('the device back with a core dump', async () => (await dev.api('GET', '/system/coredump')).status === 200);
  const { page, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/system' });
  const card = page.getByRole('region', { name: 'Core dump' });
  await card.getByText('present').waitFor();
  await card.getByText('app_elf_sha256').waitFor();
  const [dl] = await Promise.all([page.waitForEvent('download'), card.getByRole('button', { name: 'Download' }).click()]);
  assert.equal(dl.suggestedFilename(), 'coredump.bin');
  await shot(page, 'pages', 'system-coredump');
  await card.getByRole('button', { name: 'Erase' }).click();
  await card.getByText('No core dump stored.').waitFor();
  assert.equal((await dev.api('GET', '/system/coredump')).status, 404);
  await ctx.close();
});

test('keyboard: the pages are reached with Tab and Enter; the night theme', async () => {
  const { page, ctx } = await session(browser, dev, undefined, { skipSetup: true });
  await page.getByTestId('dashboard').waitFor();
  let found = false;
  for (let i = 0; i < 20 && !found; i++) {
    await page.keyboard.press('Tab');
    found = await page.evaluate(() => document.activeElement?.textContent === 'Health');
  }
  assert.ok(found, 'Health link reached with Tab');
  await page.keyboard.press('Enter');
  await page.getByTestId('conditions').waitFor();
  await page.getByRole('button', { name: 'Night' }).click();
  // The theme is applied by an effect after the click's render.
  await until('the night theme applied', async () => (await page.evaluate(() => document.documentElement.dataset.theme)) === 'night');
  await page.goto(dev.url + '/#/dashboard');
  await page.getByTestId('dashboard').waitFor();
  await shot(page, 'pages', 'dashboard-night');
  await ctx.close();
});

test('every page fits 360 px wide', async () => {
  const { page, ctx } = await session(browser, dev, { width: 360, height: 740 }, { skipSetup: true });
  await page.getByTestId('dashboard').waitFor();
  for (const p of PAGES) {
    await page.goto(`${dev.url}/#/${p}`);
    await page.getByRole('main').waitFor();
    await page.waitForLoadState('networkidle').catch(() => {});
    await until(`${p} rendered`, async () => (await page.getByText('Loading…').count()) === 0);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 360, `${p} is ${width} px wide at 360`);
    await shot(page, 'mobile-360', p);
  }
  // The menu opens and closes with its button.
  await page.getByRole('button', { name: 'Menu' }).click();
  await page.getByRole('link', { name: 'Logs' }).click();
  await page.getByTestId('log').waitFor();
  await ctx.close();
});

test('factory reset behind the typed word erases the configuration; the page reconnects', async () => {
  assert.equal((await dev.api('PUT', '/config', { time: { tz: 'CET-1CEST' } })).status, 200);
  const { page, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/system' });
  await page.getByTestId('sysinfo').waitFor();
  await page.getByLabel('Type erase to confirm').fill('erase');
  await page.getByRole('button', { name: 'Factory reset' }).click();
  await page.getByText('Factory reset: rebooting.').waitFor();
  await until('the stream dropped', async () => (await page.getByTestId('link').textContent()) !== 'live', 20000);
  await until('the configuration erased', async () => {
    const r = await dev.api('GET', '/config?ns=time');
    return r.status === 200 && r.body.time.tz === 'UTC0';
  });
  await page.getByTestId('link').getByText('live').waitFor({ timeout: 30000 });
  await ctx.close();
});
