// A dormant plugin (ABI 1.4) on the plugins page: a badge of its own, no memory, and what
// wakes it in plain words; woken by its setting, it shows as running again, live.
import assert from 'node:assert/strict';
import { access, readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { DORMANT_BUNDLE, session, shot, until, useDevice } from './harness.mjs';

let dev, browser;
// The bundle is built by `make web-fixtures`: the n2k plugin, asleep while f_n2k.enabled is false.
useDevice((d, b) => ([dev, browser] = [d, b]), { before: () => access(DORMANT_BUNDLE) });

/** install uploads a bundle through the chunked upload API and grants what it asks. */
async function install(file) {
  const data = await readFile(file);
  let r = await dev.api('POST', '/plugins/uploads', { size: data.length });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const { id, max_chunk: step } = r.body;
  for (let off = 0; off < data.length; off += step) {
    r = await dev.api('PUT', `/plugins/uploads/${id}`, { offset: off, data: data.subarray(off, off + step).toString('base64') });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  }
  r = await dev.api('POST', `/plugins/uploads/${id}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  r = await dev.api('POST', '/plugins', { upload: id, grant: r.body.bundle.manifest.capabilities });
  assert.ok(r.status < 300, JSON.stringify(r.body));
  return r.body.id;
}

test('a dormant plugin shows asleep, without memory, with what wakes it', async () => {
  const id = await install(DORMANT_BUNDLE);
  await until('the plugin dormant', async () => (await dev.api('GET', `/plugins/${id}`)).body.state === 'dormant', 60000);
  const pl = (await dev.api('GET', `/plugins/${id}`)).body;
  assert.equal(pl.memory, 0);
  assert.deepEqual(pl.wake, { config: { enabled: false } });

  const { page, ctx, errors } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/plugins' });
  const card = page.getByTestId(`plugin-${id}`);
  const badge = card.getByText('dormant: asleep until woken', { exact: true });
  await badge.waitFor();
  // A badge of its own: not the running, warning or alarm colours, a dashed border.
  assert.equal(await badge.evaluate((e) => getComputedStyle(e).borderTopStyle), 'dashed');
  assert.ok((await badge.getAttribute('class')).includes('s-dormant'));
  await card.getByText('none while asleep (its code and memory are released)').waitFor();
  const wake = card.getByTestId(`wake-${id}`);
  assert.deepEqual(await wake.getByRole('listitem').allTextContents(), [
    'the setting f_n2k.enabled is switched on',
    'a request to its endpoints, or Start',
  ]);
  await shot(page, 'plugins', 'dormant');

  // Its setting wakes it; the page follows without a reload.
  assert.equal((await dev.api('PUT', '/config', { f_n2k: { enabled: true } })).status, 200);
  await until('the plugin awake', async () => (await dev.api('GET', `/plugins/${id}`)).body.state !== 'dormant', 60000);
  await badge.waitFor({ state: 'detached' });
  assert.equal(await wake.count(), 0);
  assert.deepEqual(errors, []);
  await ctx.close();
});
