// A plugin installed from a local bundle through the chunked upload, its capabilities shown
// for consent before anything is granted; its run-time namespace (f_app) appearing live on
// the open configuration page; its table key edited; stop, start and remove.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { access } from 'node:fs/promises';
import { test } from 'node:test';
import { BUNDLE, session, shot, until, useDevice } from './harness.mjs';

let dev, browser;
// The bundle is built by `make web-fixtures`.
useDevice((d, b) => ([dev, browser] = [d, b]), { before: () => access(BUNDLE) });

test('install with consent; the namespace appears live; the table is edited', async () => {
  const { page: cfg, ctx, errors } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/config' });
  await cfg.getByTestId('ns-httpd').waitFor();
  assert.equal(await cfg.locator('[data-ns="f_app"]').count(), 0);

  const page = await ctx.newPage();
  await page.goto(dev.url + '/#/plugins');
  await page.getByText('No plugins installed.').waitFor();
  await page.getByTestId('bundle-file').setInputFiles(BUNDLE);
  const consent = page.getByTestId('consent');
  await consent.waitFor({ timeout: 60000 });
  await consent.getByText('Switch bank 1.0.0').waitFor();
  await consent.getByText("drive the board's GPIO pins").waitFor();
  await shot(page, 'plugins', 'consent');
  // Nothing is installed or granted while the consent is open.
  assert.deepEqual((await dev.api('GET', '/plugins')).body.plugins, []);
  await consent.getByRole('button', { name: 'Grant the ticked and install' }).click();
  const card = page.getByTestId('plugin-app');
  await card.waitFor();
  await card.getByText('running', { exact: true }).waitFor({ timeout: 30000 });
  const pl = (await dev.api('GET', '/plugins/app')).body;
  assert.deepEqual([...pl.granted].sort(), ['config', 'gpio', 'health', 'http', 'log', 'signalk.publish', 'signalk.put']);
  await shot(page, 'plugins', 'installed');

  // The configuration page, open all along, shows the plugin's namespace without a reload.
  await cfg.bringToFront();
  await cfg.locator('[data-ns="f_app"]').click();
  const table = cfg.getByTestId('table-f_app.switches');
  await table.waitFor();
  for (const c of ['name', 'pin', 'default']) await table.getByRole('columnheader', { name: c }).waitFor();
  await cfg.getByRole('button', { name: 'Add row' }).click();
  await cfg.getByLabel('name, row 1').fill('anchor');
  await cfg.getByLabel('pin, row 1').fill('4');
  await cfg.getByLabel('default, row 1').fill('on');
  await cfg.getByRole('button', { name: 'Add row' }).click();
  await cfg.getByLabel('name, row 2').fill('deck');
  await cfg.getByLabel('pin, row 2').fill('5');
  await cfg.getByRole('button', { name: 'Remove row 2' }).click();
  await cfg.getByRole('button', { name: 'Save' }).click();
  await cfg.getByTestId('saved').waitFor();
  const stored = (await dev.api('GET', '/config?ns=f_app')).body.f_app.switches;
  assert.deepEqual(JSON.parse(stored), [{ name: 'anchor', pin: 4, default: 'on' }]);
  await shot(cfg, 'plugins', 'table-edited');
  assert.deepEqual(errors, []);

  // Stop, start, remove with its settings: the namespace leaves the configuration page.
  await page.bringToFront();
  await card.getByRole('button', { name: 'Stop' }).click();
  await card.getByText('stopped', { exact: true }).waitFor();
  await card.getByRole('button', { name: 'Start' }).click();
  await card.getByText('running', { exact: true }).waitFor();
  page.once('dialog', (d) => d.accept());
  await card.getByLabel('with its settings').check();
  await card.getByRole('button', { name: 'Remove' }).click();
  await page.getByText('No plugins installed.').waitFor();
  await until('f_app gone from the configuration page', async () => (await cfg.locator('[data-ns="f_app"]').count()) === 0);
  await ctx.close();
});

test('a publisher key is added and removed', async () => {
  const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 3072 });
  const pem = publicKey.export({ type: 'spki', format: 'pem' });
  const { page, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/plugins' });
  const card = page.getByRole('region', { name: 'Publisher keys' });
  await card.getByText('built in').waitFor();
  const before = (await dev.api('GET', '/plugins/keys')).body.keys.length;
  await card.getByLabel("Add a publisher's public key (PEM)").fill(pem);
  await card.getByRole('button', { name: 'Add key' }).click();
  await card.getByText('Key added.').waitFor();
  const keys = (await dev.api('GET', '/plugins/keys')).body.keys;
  assert.equal(keys.length, before + 1);
  const added = keys.find((k) => !k.builtin);
  await card.getByText(added.kid).waitFor();
  await shot(page, 'plugins', 'keys');
  await card.getByRole('button', { name: 'Remove' }).click();
  await card.getByText('Key removed.').waitFor();
  await until('the key gone', async () => (await card.getByText(added.kid).count()) === 0);
  assert.equal((await dev.api('GET', '/plugins/keys')).body.keys.length, before);
  await ctx.close();
});
