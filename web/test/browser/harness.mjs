// Shared by the browser tests: a real devhost on loopback (the supervisor started as an
// operator would, with a throwaway data directory and a free port) and Debian's Chromium
// driven by playwright-core.

import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const webDir = fileURLToPath(new URL('../..', import.meta.url));
export const BIN = process.env.DEVHOST_BIN || join(webDir, '..', 'bin', 'devhost');
export const BUNDLE = process.env.WEB_BUNDLE || join(webDir, '..', '.cache', 'web', 'app.devplug');
/** A plugin that goes dormant while its feature is off (the n2k plugin, `make web-fixtures`). */
export const DORMANT_BUNDLE = process.env.WEB_DORMANT_BUNDLE || join(webDir, '..', '.cache', 'web', 'n2k.devplug');
export const FIRMWARE = process.env.WEB_FIRMWARE || join(webDir, '..', '.cache', 'web', 'fw.img');
export const DEVCTL = join(dirname(BIN), 'devctl');
export const SHOTS = join(webDir, 'test-results', 'screenshots');

/** freePort asks the kernel for a free loopback port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** until polls cond (an async predicate) until it holds or the deadline passes. */
export async function until(what, cond, ms = 30000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try {
      if (await cond()) return;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`${what} did not happen${last ? `: ${last.message}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** startDevice powers on a devhost; factory is merged into the factory document. The board
 * is the default one (the access point `Marina` in range) with a setup portal address of its
 * own, so devices started side by side do not share the portal's DNS and DHCP ports. */
export async function startDevice(factory = {}, args = []) {
  const dir = await mkdtemp(join(tmpdir(), 'devhost-web-'));
  const port = await freePort();
  const doc = { ...factory, httpd: { ...(factory.httpd ?? {}), port } };
  await writeFile(join(dir, 'factory.json'), JSON.stringify(doc));
  const rnd = (n) => Math.floor(Math.random() * n);
  const portalIP = `127.5.${rnd(256)}.${2 + rnd(252)}`;
  await writeFile(join(dir, 'board.json'), JSON.stringify({ portal_ip: portalIP }));
  const boardArgs = ['--board', join(dir, 'board.json')];
  const proc = spawn(BIN, ['--data', join(dir, 'flash'), '--factory', join(dir, 'factory.json'), ...boardArgs, '--listen', '127.0.0.1', ...args], {
    env: { ...process.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const listeners = new Set();
  const onData = (b) => {
    out += b.toString();
    listeners.forEach((fn) => fn());
  };
  proc.stdout.on('data', onData);
  proc.stderr.on('data', onData);
  const exited = new Promise((r) => proc.once('exit', r));
  const url = `http://127.0.0.1:${port}`;
  await until('the device listening', async () => out.includes(`listening on ${url}`), 30000).catch((e) => {
    proc.kill('SIGKILL');
    throw new Error(`${e.message}\n${out}`);
  });
  return {
    url,
    dir,
    portalIP,
    output: () => out,
    /** api calls the device directly (Bearer when a key is given). */
    async api(method, path, body, key) {
      const headers = { 'Content-Type': 'application/json' };
      if (key) headers.Authorization = `Bearer ${key}`;
      const r = await fetch(url + '/api/v1' + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await r.text();
      return { status: r.status, body: text ? JSON.parse(text) : undefined };
    },
    /** board drives the simulated board through devctl. */
    board(...a) {
      return new Promise((resolve, reject) => {
        const p = spawn(DEVCTL, ['board', '--data', join(dir, 'flash'), ...a], { stdio: ['ignore', 'pipe', 'pipe'] });
        let o = '';
        p.stdout.on('data', (b) => (o += b));
        p.stderr.on('data', (b) => (o += b));
        p.once('exit', (code) => (code === 0 ? resolve(o) : reject(new Error(`devctl board ${a.join(' ')}: ${o}`))));
      });
    },
    async stop() {
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 10000);
      await exited;
      clearTimeout(t);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** useDevice registers the suite's hooks: before the tests a device from startDevice(factory,
 * args) and a Chromium, handed to set; after them both stop. A suite's own fixtures start in
 * opts.before, ahead of the device, and stop in opts.after, once the device has stopped. */
export function useDevice(set, { factory = {}, args = [], before: setUp, after: tearDown } = {}) {
  let dev, browser;
  before(async () => {
    await setUp?.();
    dev = await startDevice(factory, args);
    browser = await launch();
    set(dev, browser);
  });
  after(async () => {
    await browser?.close();
    await dev?.stop();
    await tearDown?.();
  });
}

/** session opens a fresh browser context and page on the device. */
export async function session(browser, dev, viewport = { width: 1200, height: 900 }, { skipSetup = false, hash = '' } = {}) {
  const ctx = await browser.newContext({ viewport, colorScheme: 'light', acceptDownloads: true });
  // Past the first-run page (a device without a key shows it first).
  if (skipSetup) await ctx.addInitScript(() => sessionStorage.setItem('setup-skipped', '1'));
  const page = await ctx.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e));
  await page.goto(dev.url + '/' + hash);
  return { ctx, page, errors };
}

/** shot saves a screenshot under test-results/screenshots/<folder>/<name>.png. */
export async function shot(page, folder, name) {
  const dir = join(SHOTS, folder);
  await mkdir(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: true });
}
