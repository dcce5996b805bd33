// Bundles the extension (dist/extension.js, for the .vsix) or, with --tests,
// the Node tests (out/test/*.test.js, for `node --test`).
import { build } from 'esbuild';
import { readdirSync } from 'node:fs';

const tests = process.argv.includes('--tests');
const common = { bundle: true, platform: 'node', target: 'node20', format: 'cjs', sourcemap: true, logLevel: 'warning' };

if (tests) {
  await build({
    ...common,
    entryPoints: readdirSync('test').filter((f) => f.endsWith('.test.ts')).map((f) => `test/${f}`),
    outdir: 'out/test',
    external: ['vscode'],
  });
} else {
  await build({
    ...common,
    entryPoints: ['src/extension.ts'],
    outfile: 'dist/extension.js',
    external: ['vscode'],
    minify: process.argv.includes('--minify'),
  });
}
