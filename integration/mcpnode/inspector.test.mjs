// The MCP Inspector's CLI (`mcp-inspector --cli --method tools/list
// --strict`) lints the schemas of tools/list for what clients fail to read
// (type arrays, bare true or false schemas, schemas that constrain
// nothing, remote $refs). Issue 34: it found 418 warnings in toolhost
// mcp's; there must be none. Run with `npm ci && npm test`; TOOLHOST_BIN
// names the binary, else it is built from the repository.
//
// The Inspector runs through `npm exec` at the version pinned here, not
// from package.json: its tree holds an optional dependency of vite's that
// some registry mirrors lack, and a lock file made without it fails
// `npm ci` where the registry has it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'toolhost-inspector-'));
const root = path.join(work, 'root');
fs.mkdirSync(root);
let bin = process.env.TOOLHOST_BIN;

before(() => {
  if (!bin) {
    bin = path.join(work, 'toolhost');
    execFileSync('go', ['build', '-o', bin, '.'], { cwd: repo, stdio: 'inherit' });
  }
});

after(() => {
  fs.rmSync(work, { recursive: true, force: true });
});

// inspector is the Inspector's package, pinned.
const inspector = '@modelcontextprotocol/inspector@2.12.0';

test('the Inspector --strict finds no portability problem in the schemas of toolhost mcp', () => {
  const run = spawnSync('npm', ['exec', '--yes', `--package=${inspector}`, '--', 'mcp-inspector',
    '--cli', '--method', 'tools/list', '--strict', '--format', 'json', '--',
    bin, 'mcp', '--root', root, '--log-level', 'warn'], { encoding: 'utf8', timeout: 300_000 });
  assert.equal(run.status, 0, `mcp-inspector exited ${run.status} (${run.signal ?? 'no signal'}): ${run.stderr}`);
  const out = JSON.parse(run.stdout);
  // schemaFindings is left out when there is none.
  const findings = (out.schemaFindings ?? []).flatMap((t) =>
    t.findings.map((f) => `${t.toolName}: ${f.schema}.${f.path}: ${f.rule} (${f.severity})`));
  console.log(`mcp-inspector --strict: ${findings.length} findings in the schemas of ${out.result.tools.length} tools`);
  assert.equal(out.result.tools.length, 12);
  assert.deepEqual(findings, []);
});
