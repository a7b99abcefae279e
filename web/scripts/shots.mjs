// Writes the README's screenshots (docs/img) from a real devhost: the dashboard and the
// configuration page. Run with `npm run shots` after `make build`. The device joins the
// simulated board's access point from its factory settings, as a set-up device has.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch, session, startDevice } from '../test/browser/harness.mjs';

const out = fileURLToPath(new URL('../../docs/img', import.meta.url));
const dev = await startDevice({ wifi: { ssid0: 'Marina', psk0: 'mooring-line-7' } });
const browser = await launch();
try {
  const { page } = await session(browser, dev, { width: 960, height: 640 }, { skipSetup: true });
  await page.getByTestId('identity').getByText('devhost-sim').waitFor();
  await page.getByTestId('net').getByText('connected (Marina)').waitFor();
  await page.screenshot({ path: join(out, 'ui-dashboard.png') });
  await page.goto(dev.url + '/#/config');
  await page.locator('[data-ns="wifi"]').click();
  await page.getByRole('tab', { name: 'Addressing' }).click();
  await page.locator('[data-field="wifi.ip"] input').fill('192.168.1.300');
  await page.locator('[data-field="wifi.ip"]').getByTestId('field-error').waitFor();
  await page.screenshot({ path: join(out, 'ui-config.png') });
} finally {
  await browser.close();
  await dev.stop();
}
