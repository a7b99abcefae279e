// A device built to require an API key (HTTPD_AUTH_REQUIRED, --auth-required) while none is
// set: its API refuses the station side (403 auth_unconfigured) and a login is answered
// auth_open, so the page says where the key is set instead of offering a sign-in that loops.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { session, shot, useDevice } from './harness.mjs';

let dev, browser;
useDevice((d, b) => ([dev, browser] = [d, b]), { args: ['--auth-required'] });

test('a required key that is not set: the page says where to set it', async () => {
  const st = (await dev.api('GET', '/auth/status')).body;
  assert.equal(st.required, true);
  assert.equal(st.configured, false);
  assert.equal((await dev.api('GET', '/system/info')).status, 403);

  const { page, ctx, errors } = await session(browser, dev, undefined, { skipSetup: true });
  const card = page.getByTestId('key-unset');
  await card.getByRole('heading', { name: 'No API key is set' }).waitFor();
  await card.getByText("Set it from the device's setup network", { exact: false }).waitFor();
  assert.equal(await page.getByRole('form', { name: 'Sign in' }).count(), 0);
  await shot(page, 'auth', 'key-unset');
  assert.deepEqual(errors, []);
  await ctx.close();
});
