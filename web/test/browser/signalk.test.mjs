// The Signal K page against the real signalk-server (security on): the access request
// explained while it waits for approval, the token approved on the server and the stream
// coming up live, and a test PUT answered by the server.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, session, shot, useDevice } from './harness.mjs';

const SKSERVER = process.env.WEB_SKSERVER || join(BIN, '..', '..', '.cache', 'web', 'skserver');

/** startSK runs web/test/skserver and answers its commands. */
async function startSK() {
  const proc = spawn(SKSERVER, [], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: proc.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const r = await lines.next();
    if (r.done) throw new Error('skserver ended');
    return r.value;
  };
  const info = JSON.parse(await next());
  return {
    ...info,
    async cmd(c) {
      proc.stdin.write(c + '\n');
      const a = await next();
      if (a.startsWith('error:')) throw new Error(a);
      return a;
    },
    async stop() {
      const done = new Promise((r) => proc.once('exit', r));
      proc.stdin.end();
      await done;
    },
  };
}

let sk, dev, browser;
useDevice((d, b) => ([dev, browser] = [d, b]), {
  before: async () => (sk = await startSK()),
  after: () => sk?.stop(),
});

test('access request explained, approved on the server, stream up, test PUT answered', async () => {
  const { page, errors, ctx } = await session(browser, dev, undefined, { skipSetup: true, hash: '#/signalk' });
  const status = page.getByTestId('sk-status');
  await status.getByText('NO_SERVER').waitFor();
  // Point the device at the server from the configuration page.
  await page.goto(dev.url + '/#/config');
  await page.locator('[data-ns="sk"]').click();
  await page.locator('[data-field="sk.server_host"] input').fill(sk.host);
  await page.locator('[data-field="sk.server_port"] input').fill(String(sk.port));
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByTestId('saved').waitFor();

  await page.goto(dev.url + '/#/signalk');
  await status.getByText('REQUESTED').waitFor({ timeout: 60000 });
  await page.getByTestId('sk-explain').getByText('Security, Access Requests').waitFor();
  const clientId = (await status.locator('code').first().textContent()).trim();
  assert.match(clientId, /^[0-9a-f-]{36}$/);
  await shot(page, 'signalk', 'requested');

  assert.equal(await sk.cmd(`approve ${clientId}`), 'ok');
  await status.getByText('APPROVED').waitFor({ timeout: 60000 });
  await status.getByText(/^connected,/).waitFor({ timeout: 60000 });
  await page.getByTestId('sk-explain').getByText('The device holds a working token.').waitFor();

  await page.getByLabel('Path').fill('electrical.switches.webTest.state');
  await page.getByLabel('Value (JSON)').fill('1');
  await page.getByRole('button', { name: 'Send PUT' }).click();
  await page.getByText('PUT sent.').waitFor();
  const last = page.getByTestId('sk-put');
  await last.getByText('electrical.switches.webTest.state').first().waitFor({ timeout: 30000 });
  const answer = await dev.api('GET', '/sk/put');
  assert.notEqual(answer.body.state, 'NONE');
  await shot(page, 'signalk', 'approved');
  assert.deepEqual(errors, []);
  await ctx.close();
});
