// Runs the unit tests (test/unit/*.test.ts) under node's test runner: esbuild compiles each
// file with what it imports into a temporary folder first, since node 20 runs no TypeScript.
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dir = join(root, 'test', 'unit');
const files = (await readdir(dir)).filter((f) => f.endsWith('.test.ts'));
const out = await mkdtemp(join(tmpdir(), 'web-unit-'));
try {
  await build({
    entryPoints: files.map((f) => join(dir, f)),
    bundle: true,
    platform: 'node',
    format: 'esm',
    outdir: out,
    outExtension: { '.js': '.mjs' },
    external: ['node:*'],
    logLevel: 'warning',
  });
  const r = spawnSync(process.execPath, ['--test', ...files.map((f) => join(out, f.replace(/\.ts$/, '.mjs')))], { stdio: 'inherit' });
  process.exitCode = r.status ?? 1;
} finally {
  await rm(out, { recursive: true, force: true });
}
