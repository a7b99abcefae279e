// Builds the UI into ../host/ui/dist: one content-hashed script and stylesheet under assets/,
// an index.html naming them, and a .gz beside every file (the device prefers it).
import { build } from 'esbuild';
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { gzipSync, constants } from 'node:zlib';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = process.env.UI_OUT || join(root, '..', 'host', 'ui', 'dist');

// Keep the committed _README of the dist folder; everything else is rebuilt.
await mkdir(out, { recursive: true });
for (const name of await readdir(out)) {
  if (name !== '_README') await rm(join(out, name), { recursive: true, force: true });
}

const result = await build({
  entryPoints: [join(root, 'src', 'main.tsx')],
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2020',
  outdir: join(out, 'assets'),
  entryNames: '[name]-[hash]',
  chunkNames: '[name]-[hash]',
  splitting: true,
  jsx: 'automatic',
  jsxImportSource: 'preact',
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
});

// The entry script, its stylesheet, and the chunks it imports statically (preloaded, so the
// browser fetches them beside the entry instead of after parsing it).
let js = '', css = '';
const preload = [];
const rel = (f) => relative(out, join(process.cwd(), f)).split('\\').join('/');
for (const [file, o] of Object.entries(result.metafile.outputs)) {
  // Pages loaded on demand are entry points too: the first load starts at src/main.tsx.
  if (!o.entryPoint || !o.entryPoint.endsWith('src/main.tsx')) continue;
  js = rel(file);
  if (o.cssBundle) css = rel(o.cssBundle);
  for (const i of o.imports) if (i.kind === 'import-statement' && !preload.includes(rel(i.path))) preload.push(rel(i.path));
}
if (!js || !css) throw new Error('build: script or stylesheet missing from the output');

const html = (await readFile(join(root, 'index.html'), 'utf8'))
  .replace('%CSS%', '/' + css)
  .replace('%JS%', '/' + js)
  .replace('%PRELOAD%', preload.map((p) => `<link rel="modulepreload" href="/${p}">`).join('\n'));
await writeFile(join(out, 'index.html'), html);

async function* walk(dir) {
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* walk(p);
    else yield p;
  }
}
let total = 0;
for await (const p of walk(out)) {
  if (p.endsWith('.gz') || p.endsWith('_README')) continue;
  const gz = gzipSync(await readFile(p), { level: constants.Z_BEST_COMPRESSION });
  await writeFile(p + '.gz', gz);
  total += gz.length;
  console.log(`${relative(out, p).padEnd(32)} ${gz.length} bytes gzipped`);
}
console.log(`ui: ${total} bytes gzipped in total, written to ${out}`);
