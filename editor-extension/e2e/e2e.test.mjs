// End-to-end test in a real VS Code: code-server (run with Node 24) driven by
// Debian's headless Chromium through playwright-core. It installs the packaged
// .vsix (which ships the server at bin/toolhost), runs a three-step recipe and
// checks the Tools view and the progress notification step by step, follows a
// running command's output live (a later line appears in the open document),
// then runs a long command, cancels it from the view and checks its processes
// are gone, and runs `sh` in a terminal (Run in Terminal…): typed keys, a
// resized panel seen by `stty size`, a second terminal attached from the
// Tools view, and closing the terminal ending the shell. The server runs with
// a destination (`toolhost.serverArgs`: `--destination local=<the shipped
// toolhost> --root <another dir>`), so every Run… asks where: a command run
// on `local` runs in that root and shows under its group. A command that
// listens on a port raises "Port N opened by …", whose Open in Browser opens
// the page it serves, and the port shows under its handle. A command run
// with a snapshot (the default) that edits, makes and deletes files shows
// "Changes (3)" under its row; a click on a file opens the diff editor, and
// "Undo this command" (after its modal) puts the files back. Last, the
// workspace's settings get `toolhost.networkAllow` (a loopback origin the test
// serves): the extension offers a restart, and a command that curls that
// origin and a host outside the list shows the refused host under its row,
// and the word "confined" (not an emoji lock, which draws as an empty box
// without an emoji font) in its description. Then a command curls another
// loopback origin the list does not name: the server asks (approval/request),
// the notification names the command and the host, the test clicks Allow
// once, the output shows the body, and the decision is a row under it.
//
//   scripts/install-e2e.sh && npm run package && node --test e2e/
//
// Screenshots go to .e2e/screenshots/ (gitignored). Every wait is on an event
// (a DOM element, a file, a process gone) with a deadline; the recipe's steps
// wait on gate files the test creates, so nothing depends on timing.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, openWorkbench, poller, screenshots } from './support.mjs';

/**
 * hostPid turns pid, as a process of the PID namespace ns ("pid:[N]", as
 * /proc/<pid>/ns/pid reads) sees it, into this machine's: each process of
 * that namespace lists its pid in every namespace from this one down
 * (NSpid in /proc/<pid>/status).
 */
function hostPid(ns, pid) {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readlinkSync(`/proc/${d}/ns/pid`) !== ns) continue;
      const m = readFileSync(`/proc/${d}/status`, 'utf8').match(/^NSpid:\s+(.*)$/m);
      const f = m ? m[1].trim().split(/\s+/).map(Number) : [];
      if (f.length > 0 && f[f.length - 1] === pid) return f[0];
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no process ${pid} in ${ns}`);
}

const EXT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NODE24 = process.env.TOOLHOST_E2E_NODE ?? path.join(EXT_DIR, '.e2e/node24/bin/node');
const CODE_SERVER = path.join(EXT_DIR, 'e2e/codeserver/node_modules/code-server/out/node/entry.js');
const CHROMIUM = process.env.TOOLHOST_E2E_CHROMIUM ?? '/usr/bin/chromium';
const VSIX = process.env.TOOLHOST_VSIX ?? path.join(EXT_DIR, 'toolhost.vsix');
const RUN_DIR = path.join(EXT_DIR, '.e2e/run');
const SHOTS = process.env.TOOLHOST_E2E_SCREENSHOTS ?? path.join(EXT_DIR, '.e2e/screenshots');
const WS = path.join(RUN_DIR, 'workspace');
// XDG_STATE_HOME of code-server, and so of the servers: --persist keeps its
// journals and its holder's socket under STATE/toolhost, apart from the
// machine's.
const STATE = path.join(RUN_DIR, 'state');
const GATES = path.join(WS, '.gates');
// The root of the server's destination "local": another toolhost on this
// machine, reached through its stdio as ssh would reach one elsewhere.
const FAR = path.join(RUN_DIR, 'far');
const DESTINATION = 'local';
const PROGRESS_FILE = '.toolhost/e2e-progress.json';

const STEPS = ['prepare', 'compile', 'check'];
const RECIPE_LABEL = 'E2E Build';

let codeServer; // ChildProcess
let codeServerLog = '';
let browser; // BrowserContext
let page;

const screenshot = screenshots(SHOTS, () => page);
const until = poller(() => page && screenshot('timeout'));

/**
 * The --persist holders (`toolhost holder …`) under this run's state
 * directory: the first server the extension starts with --persist starts
 * one, in a session of its own, which outlives code-server; the test ends
 * them by pid.
 */
function holders() {
  const pids = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const argv = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      if (argv[1] === 'holder' && argv.some((a) => a.startsWith(STATE))) pids.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** Ends the holders of this run (SIGTERM, then SIGKILL), and so the sessions they hold. */
async function endHolders() {
  const alive = (pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  for (const sig of ['SIGTERM', 'SIGKILL']) {
    const pids = holders();
    for (const pid of pids) {
      try {
        process.kill(pid, sig);
      } catch {
        // gone
      }
    }
    const deadline = Date.now() + 10_000;
    while (pids.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  }
}

function pidsWithArg(marker) {
  const pids = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(marker)) pids.push(Number(d));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** Runs a palette command by its title, retrying until the extension host has registered it. */
async function runPalette(title, timeoutMs = 90_000) {
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await until(`the palette to list "${title}"`, async () => {
    await page.keyboard.press('Escape');
    // Right of the side bar (which the first test widens): a click there
    // would land on a Tools view row, and a changed file's row opens a diff.
    const side = await page.locator('.sidebar').boundingBox().catch(() => null);
    const x = Math.max(600, side ? side.x + side.width + 40 : 0);
    await page.locator('.monaco-workbench').click({ position: { x, y: 300 }, timeout: 2000 }).catch(() => undefined);
    await page.keyboard.press('F1');
    await input.waitFor({ state: 'visible', timeout: 3000 });
    await input.fill(`>${title}`);
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
    await row.waitFor({ state: 'visible', timeout: 3000 });
    await row.click();
    return true;
  }, timeoutMs);
}

/** The Tools view's row for a handle (by label) or a step. */
function treeRow(text) {
  return page.locator('.pane-body .monaco-list-row', { hasText: text });
}

/** Waits until a row with `label` shows `description` text. */
async function rowShows(label, description, timeoutMs = 30_000) {
  await until(`the Tools view row "${label}" to show "${description}"`, async () => {
    const texts = await treeRow(label).allInnerTexts();
    return texts.some((t) => t.includes(description));
  }, timeoutMs);
}

/** Editor text as shown: Monaco renders spaces as no-break spaces. */
function editorText(texts) {
  return texts.join('\n').replace(/\u00a0/g, ' ');
}

/** The Toolhost Server log channel as code-server wrote it to disk. */
function serverLog() {
  const logs = path.join(RUN_DIR, 'user-data/logs');
  return readdirSync(logs, { recursive: true })
    .filter((f) => path.basename(f) === 'Toolhost Server.log')
    .map((f) => readFileSync(path.join(logs, f), 'utf8'))
    .join('');
}

/**
 * pickWhere answers the destination picker that Run Command…, Run Recipe…
 * and Run in Terminal… show (the server has a destination): the row whose
 * label is `label`. It returns the rows the picker offered, as shown.
 */
async function pickWhere(label = 'This machine') {
  const rows = page.locator('.quick-input-widget .quick-input-list .monaco-list-row');
  const row = rows.filter({ has: page.locator('.label-name', { hasText: new RegExp(`^${label}$`) }) }).first();
  await row.waitFor({ state: 'visible', timeout: 30_000 });
  const offered = await rows.allInnerTexts();
  await row.click();
  return offered.map((t) => t.replace(/\u00a0/g, ' '));
}

/** Folds (expanded false) or unfolds a top row of the Tools view (a group), by its label. */
async function setExpanded(label, expanded) {
  const row = page.locator('.pane-body .monaco-list-row[aria-level="1"]', { has: page.locator('.label-name', { hasText: new RegExp(`^${label}$`) }) }).first();
  await until(`the row "${label}" ${expanded ? 'unfolded' : 'folded'}`, async () => {
    if ((await row.getAttribute('aria-expanded', { timeout: 2000 })) === String(expanded)) return true;
    await row.locator('.monaco-tl-twistie').click({ timeout: 2000 });
    return (await row.getAttribute('aria-expanded', { timeout: 2000 })) === String(expanded);
  });
}

/** The Tools view's rows in order, with their tree level (1: top), label and description. */
async function treeRows() {
  return page.locator('.pane-body .monaco-list-row').evaluateAll((rows) =>
    rows.map((r) => ({
      level: Number(r.getAttribute('aria-level')),
      text: r.innerText.replace(/\u00a0/g, ' '),
      name: (r.querySelector('.label-name')?.textContent ?? '').replace(/\u00a0/g, ' '),
      description: (r.querySelector('.label-description')?.textContent ?? '').replace(/\u00a0/g, ' '),
    })),
  );
}

function withoutRuntimeDir(env) {
  const { XDG_RUNTIME_DIR: _, ...rest } = env;
  return rest;
}

/**
 * The Tools view's rows of handles that ended, in order: label, status (the
 * description without the durations) and icon.
 */
async function endedRows() {
  const rows = await page.locator('.pane-body .monaco-list-row').evaluateAll((els) =>
    els.map((r) => ({
      label: r.querySelector('.label-name')?.textContent ?? '',
      status: (r.querySelector('.label-description')?.textContent ?? '').split(' · ').filter((p) => !/^\d/.test(p)).join(' · '),
      icon: (r.querySelector('.custom-view-tree-node-item-icon')?.className.match(/codicon-[\w-]+/) ?? [''])[0],
    })),
  );
  return rows.filter((r) => /(^| · )(completed|cancelled|failed|timed out|lost)/.test(r.status));
}

function notification(text) {
  return page.locator('.notifications-toasts .notification-toast', { hasText: text });
}

describe('toolhost extension in code-server', { timeout: 420_000 }, () => {
  before(async () => {
    for (const f of [NODE24, CODE_SERVER, CHROMIUM, VSIX]) {
      assert.ok(existsSync(f), `${f} is missing: run scripts/install-e2e.sh and npm run package`);
    }
    await endHolders(); // an earlier run's, if it was killed
    rmSync(RUN_DIR, { recursive: true, force: true });
    rmSync(SHOTS, { recursive: true, force: true });
    mkdirSync(SHOTS, { recursive: true });
    mkdirSync(path.join(WS, '.toolhost/recipes'), { recursive: true });
    mkdirSync(GATES, { recursive: true });
    // Each step prints, then waits for its gate file: the test opens the gates.
    const steps = STEPS.map((name) => ({
      name,
      argv: ['sh', '-c', `echo "${name} running"; while [ ! -e .gates/${name} ]; do sleep 0.05; done; echo "${name} ok"`],
    }));
    writeFileSync(path.join(WS, '.toolhost/recipes/build.json'), JSON.stringify({ label: RECIPE_LABEL, progressFile: PROGRESS_FILE, steps }, null, 2));
    mkdirSync(path.join(FAR, '.gates'), { recursive: true });
    writeFileSync(path.join(WS, 'README.txt'), 'toolhost e2e workspace\n');

    const userData = path.join(RUN_DIR, 'user-data');
    const extensions = path.join(RUN_DIR, 'extensions');
    const dirs = ['--user-data-dir', userData, '--extensions-dir', extensions];
    execFileSync(NODE24, [CODE_SERVER, ...dirs, '--install-extension', VSIX], { stdio: 'pipe' });
    const installed = readdirSync(extensions).find((d) => d.startsWith('toolhost.toolhost-'));
    assert.ok(installed, 'the .vsix is installed');
    // The destination runs the server the extension ships, rooted elsewhere.
    const farCommand = `'${path.join(extensions, installed, 'bin/toolhost')}' --root '${FAR}'`;
    mkdirSync(path.join(userData, 'User'), { recursive: true });
    writeFileSync(
      path.join(userData, 'User/settings.json'),
      JSON.stringify({
        'workbench.startupEditor': 'none',
        'workbench.tips.enabled': false,
        'workbench.welcomePage.walkthroughs.openOnInstall': false,
        'security.workspace.trust.enabled': false,
        'extensions.ignoreRecommendations': true,
        'telemetry.telemetryLevel': 'off',
        'chat.disableAIFeatures': true,
        'workbench.secondarySideBar.defaultVisibility': 'hidden',
        'toolhost.trace.server': 'messages',
        // xterm's DOM renderer: the terminal's text is in the DOM to read.
        'terminal.integrated.gpuAcceleration': 'off',
        // The diff editor side by side, its two sides' text to read, however narrow.
        'diffEditor.renderSideBySide': true,
        'diffEditor.useInlineViewWhenSpaceIsLimited': false,
        'toolhost.serverArgs': ['--destination', `${DESTINATION}=${farCommand}`],
      }),
    );

    const port = await freePort();
    codeServer = spawn(
      NODE24,
      [CODE_SERVER, '--bind-addr', `127.0.0.1:${port}`, '--auth', 'none', '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', ...dirs, WS],
      // Its own process group, so the whole tree is stopped at the end. PATH
      // without any `toolhost`: the extension must use the binary it ships.
      // XDG_STATE_HOME: the server's default state directory, this run's; no
      // XDG_RUNTIME_DIR, so that the holder's socket is there too.
      {
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...withoutRuntimeDir(process.env), PATH: `${path.dirname(NODE24)}:/usr/local/bin:/usr/bin:/bin`, XDG_STATE_HOME: STATE },
      },
    );
    codeServer.stdout.on('data', (d) => (codeServerLog += d));
    codeServer.stderr.on('data', (d) => (codeServerLog += d));
    const base = `http://127.0.0.1:${port}`;
    await until('code-server /healthz', async () => (await fetch(`${base}/healthz`)).ok, 60_000);

    ({ browser, page } = await openWorkbench(CHROMIUM, path.join(RUN_DIR, 'chromium'), base, WS));
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    if (codeServer && codeServer.exitCode === null) {
      const exited = new Promise((r) => codeServer.once('exit', r));
      try {
        process.kill(-codeServer.pid, 'SIGTERM');
      } catch {
        // already gone
      }
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
      try {
        process.kill(-codeServer.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    writeFileSync(path.join(RUN_DIR, 'code-server.log'), codeServerLog);
    await endHolders();
  });

  test('the extension activates: status bar item and Tools view', async () => {
    const status = page.locator('.statusbar-item', { hasText: /\d+ running/ });
    await status.first().waitFor({ timeout: 90_000 });
    assert.match(await status.first().innerText(), /0 running/);
    await status.first().click(); // its command focuses the Tools view
    await page.locator('.sidebar .composite.title', { hasText: 'Toolhost: Tools' }).first().waitFor({ timeout: 30_000 });
    // A wider side bar, so the screenshots show whole descriptions.
    const sash = await page.locator('.sidebar').boundingBox();
    if (sash) {
      const x = sash.x + sash.width + 1;
      await page.mouse.move(x, sash.y + 200);
      await page.mouse.down();
      await page.mouse.move(x + 260, sash.y + 200, { steps: 5 });
      await page.mouse.up();
    }
    await screenshot('activated');
  });

  test('Run Recipe shows each step in the progress notification and the Tools view, then the result', async () => {
    await runPalette('Toolhost: Run Recipe');
    const pick = page.locator('.quick-input-list .monaco-list-row', { hasText: RECIPE_LABEL });
    await pick.first().waitFor({ timeout: 30_000 });
    await screenshot('recipe-picker');
    await pick.first().click();
    await pickWhere();

    for (const [i, name] of STEPS.entries()) {
      const msg = `step ${i + 1}/${STEPS.length}: ${name}`;
      await notification(`Toolhost: ${RECIPE_LABEL}`).filter({ hasText: msg }).first().waitFor({ timeout: 30_000 });
      await rowShows(RECIPE_LABEL, msg);
      await rowShows(name, 'running');
      // The recipe asks for a progress file: the view shows it under the recipe.
      if (i === 0) await rowShows('progress file', PROGRESS_FILE);
      await until('the status bar to say 1 running', async () => /1 running/.test(await page.locator('.statusbar-item', { hasText: /running/ }).first().innerText()));
      await screenshot(`recipe-step-${i + 1}-${name}`);
      writeFileSync(path.join(GATES, name), '');
    }

    await rowShows(RECIPE_LABEL, 'completed');
    for (const name of STEPS) await rowShows(name, 'done');
    await until('the progress notification to close', async () => (await notification(`Toolhost: ${RECIPE_LABEL}`).count()) === 0);
    await until('the status bar to say 0 running', async () => /0 running/.test(await page.locator('.statusbar-item', { hasText: /running/ }).first().innerText()));
    await screenshot('recipe-completed');

    // The progress file's row opens the file: the server's last snapshot, in amplihack's names.
    await treeRow('progress file').first().click();
    await page.locator('.tabs-container .tab', { hasText: path.basename(PROGRESS_FILE) }).first().waitFor({ timeout: 30_000 });
    await until('the progress file to say the recipe completed', async () => {
      const text = editorText(await page.locator('.editor-group-container .monaco-editor .view-lines').allInnerTexts());
      return text.includes(`"recipe_name":"${RECIPE_LABEL}"`) && text.includes('"status":"completed"');
    });
    await screenshot('progress-file');
    await runPalette('View: Close All Editors');
  });

  test('the result is in the Toolhost output channel and Open Output shows the whole output', async () => {
    await runPalette('Toolhost: Show Results');
    await until('the output channel to show the recipe result', async () =>
      editorText(await page.locator('.part.panel .monaco-editor .view-lines').allInnerTexts()).includes(`${RECIPE_LABEL}: completed`),
    );
    await screenshot('results-channel');
    const row = treeRow(RECIPE_LABEL).first();
    await row.hover();
    await row.locator('.action-label[aria-label="Open Output"]').click();
    await page.locator('.tabs-container .tab', { hasText: 'output.log' }).first().waitFor({ timeout: 30_000 });
    await until('output.log to show every step\'s output', async () => {
      const text = editorText(await page.locator('.editor-group-container .monaco-editor .view-lines').allInnerTexts());
      return STEPS.every((name) => text.includes(`${name} ok`));
    });
    await screenshot('open-output');
  });

  test('Open Output on a running command follows its output live, to the end', async () => {
    const id = `live${Math.floor(Math.random() * 1e9)}`;
    // It prints, waits for a gate the test creates, prints 300 lines more (more
    // than a screen) and a last one, waits for a second gate, ends.
    const line = `sh -c "echo one-${id}; until [ -e .gates/${id}a ]; do sleep 0.05; done; seq 300; echo two-${id}; until [ -e .gates/${id}b ]; do sleep 0.05; done"`;
    await runPalette('Toolhost: Run Command');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible' });
    await input.fill(line);
    await input.press('Enter');
    await pickWhere();
    await rowShows(line, 'running');

    const row = treeRow(line).first();
    await row.hover();
    await row.locator('.action-label[aria-label="Open Output"]').click();
    const shown = async () => editorText(await page.locator('.editor-group-container .monaco-editor .view-lines').allInnerTexts());
    await until('the live output to show the first line', async () => (await shown()).includes(`one-${id}`));
    // A live document of its own (toolhost-output:), not the output.log file.
    const tab = page.locator('.tabs-container .tab.active');
    assert.match(await tab.innerText(), /sh -c .*\.log/s);
    assert.ok(!(await shown()).includes(`two-${id}`), 'the command waits on its gate');
    await screenshot('live-output-first-line');

    writeFileSync(path.join(GATES, `${id}a`), '');
    // Monaco renders only the lines in view: seeing the last line (and no
    // longer the first) says the document followed its end.
    await until('the live output to show the later line, without reopening', async () => (await shown()).includes(`two-${id}`));
    assert.ok(!(await shown()).includes(`one-${id}`), 'scrolled to the end');
    assert.ok(!(await shown()).includes('end of output'), 'still running');
    await screenshot('live-output-later-line');

    // Closing its tab stops the reading, as the extension logs; Open Output
    // again reads it anew, while it still runs.
    await tab.hover();
    await tab.locator('.tab-actions .action-label').first().click();
    await until('the extension to log that the tab closed', () => serverLog().includes('stopped, its tab was closed'));
    await row.hover();
    await row.locator('.action-label[aria-label="Open Output"]').click();
    await until('the reopened live output to show the later line', async () => (await shown()).includes(`two-${id}`));
    assert.match(await tab.innerText(), /sh -c .*\.log/s);

    writeFileSync(path.join(GATES, `${id}b`), '');
    await rowShows(line, 'completed');
    await until('the live output to say the command ended', async () => (await shown()).includes('the command ended: end of output'));
    assert.match(await tab.innerText(), /sh -c .*\.log/s, 'the same tab');
    await screenshot('live-output-ended');
    // Close it, so the next tests see their own editors.
    await page.keyboard.press('Escape');
    await runPalette('View: Close All Editors');
  });

  test('a long command is cancelled from the Tools view and its processes are gone', async () => {
    const marker = `1000.${Math.floor(Math.random() * 1e9)}`;
    const line = `sh -c "echo started-${marker}; sleep ${marker} & sleep ${marker}; wait"`;
    await runPalette('Toolhost: Run Command');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible' });
    await input.fill(line);
    await input.press('Enter');
    await pickWhere();

    await rowShows(line, 'running');
    await until('the command\'s processes', () => pidsWithArg(marker).length >= 3, 30_000);
    await notification(`Toolhost: ${line}`).first().waitFor({ timeout: 30_000 });
    await screenshot('long-command-running');

    // Open Output on a running handle: its live output.log.
    const row = treeRow(line).first();
    await row.hover();
    await row.locator('.action-label[aria-label="Open Output"]').click();
    await until('the running command\'s output to open', async () =>
      editorText(await page.locator('.editor-group-container .monaco-editor .view-lines').allInnerTexts()).includes(`started-${marker}`),
    );
    await screenshot('long-command-output');

    await row.hover();
    await row.locator('.action-label[aria-label="Cancel"]').click();

    await rowShows(line, 'cancelled');
    await until('every process of the command to be gone', () => pidsWithArg(marker).length === 0, 15_000);
    await until('the progress notification to close', async () => (await notification(`Toolhost: ${line}`).count()) === 0);
    assert.equal(await notification('failed').count(), 0, 'no failure warning for a cancel the user asked for');
    await screenshot('long-command-cancelled');
  });

  test('a failing command raises a warning notification', async () => {
    const line = 'sh -c "echo broken >&2; exit 3"';
    await runPalette('Toolhost: Run Command');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible' });
    await input.fill(line);
    await input.press('Enter');
    await pickWhere();
    await notification('failed (exit code 3)').first().waitFor({ timeout: 30_000 });
    await rowShows(line, 'failed (exit 3)');
    await until('the progress notification to close', async () => (await notification(`Toolhost: ${line}`).filter({ hasText: 'running' }).count()) === 0);
    await screenshot('failure-warning');
  });

  test('a command run with a snapshot: "Changes (3)" under its row, a changed file in the diff editor, and Undo this command puts the files back', async () => {
    const id = `snap${Math.floor(Math.random() * 1e9)}`;
    const [a, b, c] = ['a', 'b', 'c'].map((x) => `${id}-${x}.txt`);
    writeFileSync(path.join(WS, a), 'one\ntwo\n');
    writeFileSync(path.join(WS, b), 'bee\n');
    // It edits a, makes c and deletes b (toolhost.snapshotCommands is on by default).
    const line = `sh -c "echo three >> ${a}; echo new > ${c}; rm ${b}"`;
    await runPalette('Notifications: Clear All Notifications');
    await page.locator('.statusbar-item', { hasText: /\d+ running/ }).first().click(); // the Tools view
    await runPalette('Toolhost: Run Command');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible' });
    await input.fill(line);
    await input.press('Enter');
    await pickWhere();
    await rowShows(line, 'completed');

    // "Changes (3)" is the command's child, and the three files are its children, with their kinds.
    let rows = [];
    let handleAt = -1;
    await until('"Changes (3)" under the command, with its files', async () => {
      rows = await treeRows();
      handleAt = rows.findIndex((r) => r.text.includes(line));
      const kids = rows.slice(handleAt + 2, handleAt + 5);
      return (
        handleAt >= 0 &&
        rows[handleAt + 1]?.text.startsWith('Changes (3)') &&
        rows[handleAt + 1].level === rows[handleAt].level + 1 &&
        kids.length === 3 &&
        kids.every((r) => r.level === rows[handleAt].level + 2)
      );
    });
    const files = rows.slice(handleAt + 2, handleAt + 5).map((r) => `${r.name}: ${r.description}`);
    assert.deepEqual(files, [`${a}: modified`, `${b}: deleted`, `${c}: added`], JSON.stringify(rows));
    await screenshot('snapshot-changes');

    // A click on the modified file: the diff editor, the snapshot (left) against the file now (right).
    const diffEditor = page.locator('.editor-group-container .monaco-diff-editor');
    const sideText = async (side) => editorText(await diffEditor.locator(`.editor.${side} .view-lines`).allInnerTexts());
    // The file's own row (the command's row names the files too).
    const fileRow = (name) => page.locator('.pane-body .monaco-list-row', { has: page.locator('.label-name', { hasText: new RegExp(`^${name}$`) }) }).first();
    await fileRow(a).click();
    await page.locator('.tabs-container .tab', { hasText: `${a} (before` }).first().waitFor({ timeout: 30_000 });
    await until('the diff editor to show the file before and now', async () => {
      const [before, now] = [await sideText('original'), await sideText('modified')];
      return before.includes('two') && !before.includes('three') && now.includes('three');
    });
    assert.match(await page.locator('.tabs-container .tab.active').innerText(), new RegExp(`${a} \\(before sh -c .*↔ now`));
    await screenshot('snapshot-diff-modified');
    // The deleted file: as it was on the left, nothing on the right.
    await fileRow(b).click();
    await page.locator('.tabs-container .tab', { hasText: `${b} (before` }).first().waitFor({ timeout: 30_000 });
    await until('the diff editor to show the deleted file before', async () => (await sideText('original')).includes('bee') && !(await sideText('modified')).includes('bee'));
    assert.match(await page.locator('.tabs-container .tab.active').innerText(), /↔ now \(deleted\)/);
    await screenshot('snapshot-diff-deleted');
    await runPalette('View: Close All Editors');

    // Undo this command, from the row's context menu, while another command
    // runs: a modal names how many files, the server answers SnapshotBusy,
    // "Restore anyway" sends it with force, and the files are back.
    const busy = `sh -c "until [ -e .gates/${id} ]; do sleep 0.05; done"`;
    await runPalette('Toolhost: Run Command');
    await input.waitFor({ state: 'visible' });
    await input.fill(busy);
    await input.press('Enter');
    await pickWhere();
    await rowShows(busy, 'running');
    await treeRow(line).first().click({ button: 'right' });
    const undo = page.locator('.monaco-menu .action-item', { hasText: 'Undo this command' });
    await undo.first().waitFor({ timeout: 30_000 });
    await screenshot('snapshot-undo-menu');
    await undo.first().click();
    const dialog = page.locator('.monaco-dialog-box', { hasText: '3 files go back to how they were before it ran' });
    await dialog.first().waitFor({ timeout: 30_000 });
    assert.match(await dialog.first().innerText(), new RegExp(`${a} \\(modified\\), ${b} \\(deleted\\), ${c} \\(added\\)`));
    await screenshot('snapshot-undo-confirm');
    await dialog.first().locator('.monaco-button', { hasText: /^Undo$/ }).click();
    const force = page.locator('.monaco-dialog-box', { hasText: 'Commands of this session are running' });
    await force.first().waitFor({ timeout: 30_000 });
    await screenshot('snapshot-undo-busy');
    assert.ok(existsSync(path.join(WS, c)), 'nothing restored before "Restore anyway"');
    await force.first().locator('.monaco-button', { hasText: /^Restore anyway$/ }).click();
    await until('the files to be back on disk', () =>
      existsSync(path.join(WS, b)) &&
      readFileSync(path.join(WS, a), 'utf8') === 'one\ntwo\n' &&
      readFileSync(path.join(WS, b), 'utf8') === 'bee\n' &&
      !existsSync(path.join(WS, c)),
    );
    await notification(`undid "${line}"`).first().waitFor({ timeout: 30_000 });
    await rowShows('Changes (3)', 'undone');
    await screenshot('snapshot-undone');
    writeFileSync(path.join(GATES, id), '');
    await rowShows(busy, 'completed');
  });

  test('Run in Terminal runs sh: typed keys answer, stty size follows the panel, Open Terminal attaches, closing ends it', async () => {
    const line = 'env TOOLHOST_E2E_TERM=1 sh';
    await page.locator('.statusbar-item', { hasText: /\d+ running/ }).first().click(); // the Tools view
    await runPalette('Toolhost: Run in Terminal');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible' });
    await input.fill(line);
    await input.press('Enter');
    await pickWhere();
    await rowShows('TOOLHOST_E2E_TERM', 'running');

    const term = page.locator('.part.panel .terminal-wrapper.active');
    const screenText = async () => (await term.locator('.xterm-rows').innerText()).replace(/\u00a0/g, ' ');
    // Keys go to xterm's textarea, as a user's typing does.
    // The palette helper presses Escape first: away from the terminal, so the shell does not get it.
    const palette = async (title) => {
      await page.locator('.sidebar .composite.title').first().click();
      await runPalette(title);
    };
    const type = async (keys) => {
      await term.locator('.xterm-helper-textarea').focus();
      await page.keyboard.type(keys);
      await page.keyboard.press('Enter');
    };
    await until('the shell prompt in the terminal', async () => /[$#] *$/m.test(await screenText()));
    await type('echo hi-$((6*7))');
    await until('hi-42 in the terminal', async () => (await screenText()).includes('hi-42'));
    // A confined shell has a PID namespace of its own: $$ is that
    // namespace's pid, which hostPid turns into this machine's.
    await type('echo pid-$$ ns-$(readlink /proc/self/ns/pid)');
    let pid;
    let printed;
    await until('the shell\'s pid in the terminal', async () => {
      const m = (await screenText()).match(/pid-(\d+) ns-(pid:\[\d+\])/);
      if (m) [printed, pid] = [Number(m[1]), hostPid(m[2], Number(m[1]))];
      return Boolean(m);
    });
    process.kill(pid, 0); // the shell runs, on this machine
    await screenshot('terminal-typed');

    // The size the shell sees, before and after the panel is maximised.
    const sizes = async () => [...(await screenText()).matchAll(/size-(\d+) (\d+)/g)].map((m) => ({ rows: Number(m[1]), cols: Number(m[2]) }));
    await type("stty size | sed 's/^/size-/'");
    await until('stty size in the terminal', async () => (await sizes()).length === 1);
    const [before] = await sizes();
    await palette('View: Toggle Maximized Panel');
    // The panel's new size reaches the server as a resize request, the typing
    // as writeInput requests: should stty run before the resize is applied,
    // it prints the old size, and is asked again (each answer is awaited).
    let afterMax = before;
    for (let attempt = 1; afterMax.rows === before.rows && attempt <= 5; attempt++) {
      const n = (await sizes()).length;
      await type("stty size | sed 's/^/size-/'");
      await until(`stty size answer ${attempt}`, async () => (await sizes()).length > n);
      afterMax = (await sizes()).at(-1);
    }
    assert.ok(afterMax.rows > before.rows, `more rows once maximised: ${JSON.stringify({ before, afterMax })}`);
    await screenshot('terminal-maximised');
    await palette('View: Toggle Maximized Panel');

    // Open Terminal on the running handle: the screen so far, then what follows.
    await term.evaluate((el) => el.setAttribute('data-e2e', 'first'));
    const attached = page.locator('.part.panel .terminal-wrapper.active:not([data-e2e="first"])');
    const row = treeRow('TOOLHOST_E2E_TERM').first();
    await row.hover();
    await row.locator('.action-label[aria-label="Open Terminal"]').click();
    await attached.waitFor({ timeout: 30_000 });
    const attachedText = async () => (await attached.locator('.xterm-rows').innerText()).replace(/\u00a0/g, ' ');
    await until('the attached terminal to replay the output', async () => (await attachedText()).includes('hi-42') && (await attachedText()).includes(`pid-${printed}`));
    await type('echo both-$((2+3))');
    await until('the attached terminal to show the answer to its typing', async () => (await attachedText()).includes('both-5'));
    await screenshot('terminal-attached');
    // Closing an attached terminal leaves the command running; the first one
    // saw the typing in the other too.
    await palette('Terminal: Kill the Active Terminal Instance');
    await page.locator('.part.panel .terminal-wrapper.active[data-e2e="first"]').waitFor({ timeout: 30_000 });
    await until('the first terminal to show what was typed in the other', async () => (await screenText()).includes('both-5'));
    process.kill(pid, 0);
    await rowShows('TOOLHOST_E2E_TERM', 'running');

    // Closing the terminal that started it cancels the handle: the shell is gone.
    await palette('Terminal: Kill the Active Terminal Instance');
    await rowShows('TOOLHOST_E2E_TERM', 'cancelled');
    await until('the shell to be gone', () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch (e) {
        return e.code === 'ESRCH';
      }
    });
    assert.equal(await notification('TOOLHOST_E2E_TERM').filter({ hasText: 'failed' }).count(), 0, 'no failure warning for a terminal the user closed');
    await screenshot('terminal-closed');
  });

  test('a terminal closes when its command exits 0, and stays with the exit line after another code until a key', async () => {
    const palette = async (title) => {
      await page.locator('.sidebar .composite.title').first().click();
      await runPalette(title);
    };
    const open = async (line, tag) => {
      await palette('Toolhost: Run in Terminal');
      const input = page.locator('.quick-input-widget .quick-input-box input');
      await input.waitFor({ state: 'visible' });
      await input.fill(line);
      await input.press('Enter');
      await pickWhere();
      const term = page.locator(`.part.panel .terminal-wrapper.active:not([data-e2e])`);
      await term.waitFor({ timeout: 30_000 });
      await term.evaluate((el, t) => el.setAttribute('data-e2e', t), tag);
      return page.locator(`.part.panel .terminal-wrapper[data-e2e="${tag}"]`);
    };
    const text = async (term) => (await term.locator('.xterm-rows').innerText()).replace(/\u00a0/g, ' ');

    await page.locator('.statusbar-item', { hasText: /\d+ running/ }).first().click(); // the Tools view
    const ok = await open('env TOOLHOST_E2E_EXIT=0 sh', 'exit0');
    await until('the prompt', async () => /[$#] *$/m.test(await text(ok)));
    await ok.locator('.xterm-helper-textarea').focus();
    await page.keyboard.type('exit');
    await page.keyboard.press('Enter');
    await rowShows('TOOLHOST_E2E_EXIT=0', 'completed');
    await ok.waitFor({ state: 'detached', timeout: 30_000 });

    const bad = await open('env TOOLHOST_E2E_EXIT=3 sh -c "echo bye-$((1+2)); exit 3"', 'exit3');
    await until('the exit line and the prompt to close', async () => {
      const t = await text(bad);
      return t.includes('bye-3') && t.includes('[process exited with code 3]') && t.includes('Press any key to close the terminal.');
    });
    await rowShows('TOOLHOST_E2E_EXIT=3', 'failed (exit 3)');
    await screenshot('terminal-exit-3');
    await bad.locator('.xterm-helper-textarea').focus();
    await page.keyboard.press('x');
    await bad.waitFor({ state: 'detached', timeout: 30_000 });
  });

  test('a command that listens on a port: "Port N opened" with its port, Open in Browser, the port in the Tools view until cancelled', async () => {
    await runPalette('Notifications: Clear All Notifications');
    const id = `port${Math.floor(Math.random() * 1e9)}`;
    const portFile = path.join(GATES, id);
    // An HTTP server on a free port of 127.0.0.1, which writes its port to a file once it listens.
    const line = `python3 -c "import http.server as h,sys; s=h.HTTPServer(('127.0.0.1',0),h.SimpleHTTPRequestHandler); open(sys.argv[1],'w').write(str(s.server_port)); s.serve_forever()" .gates/${id}`;
    await runPalette('Toolhost: Run Command');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible' });
    await input.fill(line);
    await input.press('Enter');
    await pickWhere();
    let port = 0;
    await until('the listener\'s port file', () => {
      const t = existsSync(portFile) ? readFileSync(portFile, 'utf8') : '';
      if (/^\d+$/.test(t)) port = Number(t);
      return port > 0;
    });
    const toast = notification(`Port ${port} opened by ${line}`);
    await toast.first().waitFor({ timeout: 30_000 });
    assert.equal(await notification('opened by').count(), 1, 'one notification, for the one port');
    await screenshot('port-opened');

    // The port under its handle in the Tools view.
    await rowShows(`Port ${port}`, `127.0.0.1 · pid`);
    const rows = await treeRows();
    const handleAt = rows.findIndex((r) => r.text.includes(line));
    const portAt = rows.findIndex((r) => r.text.includes(`Port ${port}`));
    assert.ok(handleAt >= 0 && portAt === handleAt + 1 && rows[portAt].level === rows[handleAt].level + 1, `the port is the handle's child: ${JSON.stringify(rows)}`);

    // Open in Browser: asExternalUri, then openExternal, opens a page that the listener serves.
    const opened = browser.waitForEvent('page', { timeout: 30_000 });
    await toast.first().locator('.monaco-button', { hasText: 'Open in Browser' }).click();
    const dialog = page.locator('.monaco-dialog-box .monaco-button', { hasText: /^Open$/ });
    const popup = await Promise.race([opened, dialog.waitFor({ timeout: 30_000 }).then(async () => (await dialog.click(), opened))]);
    await popup.waitForLoadState('domcontentloaded').catch(() => undefined);
    assert.match(popup.url(), new RegExp(`[:/]${port}(/|$)`), `the page opened is the port's: ${popup.url()}`);
    await until('the page to show what the listener serves', async () => (await popup.content()).includes('Directory listing'));
    await popup.close();
    await screenshot('port-tools-view');

    const row = treeRow(line).first();
    await row.hover();
    await row.locator('.action-label[aria-label="Cancel"]').click();
    await rowShows(line, 'cancelled');
    await until('the port row to go once it closed', async () => (await treeRow(`Port ${port}`).count()) === 0);
  });

  test('Run Command offers the destination; a command run there shows under its group', async () => {
    const id = `far${Math.floor(Math.random() * 1e9)}`;
    const line = `sh -c "echo here > ran-${id}; until [ -e .gates/${id} ]; do sleep 0.05; done; echo out-${id}"`;
    await runPalette('Toolhost: Run Command');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible' });
    await input.fill(line);
    await input.press('Enter');
    await page.locator('.quick-input-widget .quick-input-list .monaco-list-row', { hasText: DESTINATION }).first().waitFor({ timeout: 30_000 });
    await screenshot('destination-picker');
    const offered = await pickWhere(DESTINATION);
    assert.equal(offered.length, 2, `this machine and one destination: ${JSON.stringify(offered)}`);
    assert.match(offered[0], /This machine/);
    assert.match(offered[1], new RegExp(`^${DESTINATION}\\s*(idle|ready)[\\s\\S]*bin/toolhost --root ${FAR}`), `with its state and command: ${JSON.stringify(offered)}`);

    // It ran at the destination's root, not in the workspace.
    await until('the command to run at the destination', () => existsSync(path.join(FAR, `ran-${id}`)));
    assert.ok(!existsSync(path.join(WS, `ran-${id}`)));
    // The earlier tests' rows (their Changes too) fill This machine's group,
    // and the list draws only the rows in view: fold it, so that the
    // destination's group, below it, is in view.
    await setExpanded('This machine', false);
    await rowShows(line, 'running');
    await rowShows(DESTINATION, 'ready');
    const rows = await treeRows();
    const group = rows.findIndex((r) => r.level === 1 && r.text.startsWith(DESTINATION));
    const mine = rows.findIndex((r) => r.text.includes(line));
    assert.ok(group >= 0 && mine > group && rows[mine].level === 2, `under the ${DESTINATION} group: ${JSON.stringify(rows)}`);
    assert.ok(rows.slice(group + 1, mine).every((r) => r.level > 1), `no other group between: ${JSON.stringify(rows)}`);
    assert.ok(rows.some((r) => r.level === 1 && r.text.startsWith('This machine')));
    // Its elapsed time ticks (the view refreshes the rows of running handles alone).
    const shown = await treeRow(line).first().innerText();
    await until('the running handle\'s elapsed time to tick', async () => (await treeRow(line).first().innerText()) !== shown, 10_000);
    await screenshot('destination-running');

    writeFileSync(path.join(FAR, '.gates', id), '');
    await rowShows(line, 'completed');
    await screenshot('destination-completed');

    // Its output.log is on the destination ("local//…/output.log"): Open Output reads it there.
    const row = treeRow(line).first();
    await row.hover();
    await row.locator('.action-label[aria-label="Open Output"]').click();
    await until('the destination\'s output to open', async () =>
      editorText(await page.locator('.editor-group-container .monaco-editor .view-lines').allInnerTexts()).includes(`out-${id}`),
    );
    await screenshot('destination-output');
    await setExpanded('This machine', true);
    await runPalette('View: Close All Editors');
  });

  test('a crashing server is restarted a bounded number of times, then the user is told', async () => {
    const serverPids = () => pidsWithArg(`bin/toolhost\0--root\0${WS}\0`);
    await runPalette('Notifications: Clear All Notifications');
    // Each restarted server is killed once the client runs it (its log says
    // so): one killed mid-start is a failed start to vscode-languageclient,
    // whose restart then races its own stop, rather than a crash.
    const started = () => (serverLog().match(/The server is running:/g) ?? []).length;
    let pid;
    await until('one server process', () => serverPids().length === 1);
    [pid] = serverPids();
    for (let i = 1; i <= 3; i++) {
      const before = started();
      process.kill(pid, 'SIGKILL');
      await until(`restart ${i} after a crash`, () => {
        const p = serverPids();
        return p.length === 1 && p[0] !== pid && started() > before;
      });
      [pid] = serverPids();
    }
    process.kill(pid, 'SIGKILL');
    const told = notification('crashed 4 times');
    await told.first().waitFor({ timeout: 30_000 });
    assert.deepEqual(serverPids().filter((p) => p !== pid), [], 'not restarted a fourth time');
    await screenshot('server-crashed');
    await told.first().locator('.monaco-button', { hasText: 'Restart Server' }).click();
    await until('the server to be back after Restart Server', () => serverPids().length === 1 && serverPids()[0] !== pid);
    // and it serves: a command runs to completion
    await runPalette('Toolhost: Run Command');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible' });
    await input.fill('echo back');
    await input.press('Enter');
    await pickWhere();
    await rowShows('echo back', 'completed');
    await screenshot('server-restarted');
  });
  test('toolhost.networkAllow in the workspace settings: a restart, then a command shows the host it was refused and the word "confined"', async () => {
    // The allowed origin: a loopback server of the test's, named by its IP
    // literal (a name resolving to loopback is refused by design).
    let hits = 0;
    const origin = createHttpServer((_, res) => {
      hits++;
      res.end('allowed-origin\n');
    });
    await new Promise((r) => origin.listen(0, '127.0.0.1', r));
    const port = origin.address().port;
    try {
      await runPalette('Notifications: Clear All Notifications');
      mkdirSync(path.join(WS, '.vscode'), { recursive: true });
      writeFileSync(path.join(WS, '.vscode/settings.json'), JSON.stringify({ 'toolhost.networkAllow': [`127.0.0.1:${port}`] }, null, 2));
      const prompt = notification('restart the server to use the new settings');
      await prompt.first().waitFor({ timeout: 30_000 });
      await screenshot('network-allow-restart-prompt');
      await prompt.first().locator('.monaco-button', { hasText: 'Restart Server' }).click();
      // The extension logs the session's default once the new server runs.
      await until('the server to run again with the allow-list', () => serverLog().includes(`network allow-list: 127.0.0.1:${port}.`));

      const id = `net${Math.floor(Math.random() * 1e9)}`;
      // refused.invalid is refused by the proxy by its name, before any lookup.
      const line = `sh -c "echo ${id}; curl -sS http://127.0.0.1:${port}/; curl -sS http://refused.invalid/"`;
      await page.locator('.statusbar-item', { hasText: /\d+ running/ }).first().click(); // the Tools view
      await runPalette('Toolhost: Run Command');
      const input = page.locator('.quick-input-widget .quick-input-box input');
      await input.waitFor({ state: 'visible' });
      await input.fill(line);
      await input.press('Enter');
      await pickWhere();
      await rowShows(line, 'completed');
      assert.equal(hits, 1, 'the allowed origin was reached, once');

      // The refused host, as a child of the command's row.
      const refused = 'Refused: refused.invalid:80 (1×)';
      await rowShows(refused, refused);
      const rows = await treeRows();
      const handleAt = rows.findIndex((r) => r.text.includes(id));
      const refusedAt = rows.findIndex((r) => r.text.includes(refused));
      assert.ok(handleAt >= 0 && refusedAt > handleAt && rows[refusedAt].level === rows[handleAt].level + 1, `the refused host is the handle's child: ${JSON.stringify(rows)}`);
      // Its only child: the restarted server's h-1 is not the recipe that was h-1 before.
      const end = rows.findIndex((r, i) => i > handleAt && r.level <= rows[handleAt].level);
      const children = rows.slice(handleAt + 1, end < 0 ? rows.length : end);
      // Besides its snapshot's "Changes (0)": it wrote nothing in the workspace.
      assert.deepEqual(children.map((r) => `${r.name}${r.description ? `: ${r.description}` : ''}`), [refused, 'Changes (0): nothing changed'], `nothing of another handle under it: ${JSON.stringify(rows)}`);
      assert.ok(!rows.some((r) => r.text.includes(`Refused: 127.0.0.1:${port}`)), 'the allowed origin is not refused');

      // "confined" as text in the row's description, drawn by any font; no emoji lock.
      const description = await treeRow(line).first().locator('.label-description').innerText();
      assert.match(description.replace(/\u00a0/g, ' '), /^confined · completed · /);
      assert.doesNotMatch(await treeRow(line).first().innerText(), /\u{1F512}/u);
      await screenshot('network-allow-refused');

      // The tooltip says the allow-list and what went through.
      await treeRow(line).first().locator('.label-name').hover();
      const hover = page.locator('.monaco-hover, .workbench-hover', { hasText: `allowed: 127.0.0.1:${port}` });
      await hover.first().waitFor({ timeout: 30_000 });
      const tip = (await hover.first().innerText()).replace(/\u00a0/g, ' ');
      assert.match(tip, new RegExp(`network allow-list: 127\\.0\\.0\\.1:${port}`));
      assert.match(tip, /refused: refused\.invalid:80 \(1 attempt\)/);
      await screenshot('network-allow-tooltip');
    } finally {
      origin.close();
    }
  });

  test('an ask for an origin the allow-list does not name: one notification names the command and the host, Allow once lets the command fetch the body, and the decision shows under its row', async () => {
    // The server still runs with the previous test's allow-list, which does
    // not name this origin: an IP literal it does not name is asked about.
    let hits = 0;
    const origin = createHttpServer((_, res) => {
      hits++;
      res.end('asked-origin-body\n');
    });
    await new Promise((r) => origin.listen(0, '127.0.0.1', r));
    const port = origin.address().port;
    try {
      await runPalette('Notifications: Clear All Notifications');
      const id = `ask${Math.floor(Math.random() * 1e9)}`;
      const line = `sh -c "echo ${id}; curl -sS http://127.0.0.1:${port}/"`;
      await page.locator('.statusbar-item', { hasText: /\d+ running/ }).first().click(); // the Tools view
      await runPalette('Toolhost: Run Command');
      const input = page.locator('.quick-input-widget .quick-input-box input');
      await input.waitFor({ state: 'visible' });
      await input.fill(line);
      await input.press('Enter');
      await pickWhere();
      const ask = notification(`connect to 127.0.0.1:${port}`);
      await ask.first().waitFor({ timeout: 30_000 });
      assert.equal(await ask.count(), 1, 'one notification');
      const text = (await ask.first().innerText()).replace(/\u00a0/g, ' ');
      assert.ok(text.includes(`"sh -c echo ${id}; curl -sS http://127.0.0.1:${port}/" (in ${WS})`), `the command and its directory: ${text}`);
      const buttons = (await ask.first().locator('.monaco-button').allInnerTexts()).map((b) => b.trim());
      assert.equal(buttons[0], 'Allow once', JSON.stringify(buttons));
      assert.equal(buttons[buttons.length - 1], 'Deny', JSON.stringify(buttons));
      assert.ok(buttons.every((b) => ['Allow once', 'Allow for this command', 'Allow for this session', 'Always', 'Deny'].includes(b)), JSON.stringify(buttons));
      assert.equal(hits, 0, 'the connection is held while the user decides');
      await rowShows(line, 'running');
      await screenshot('approval-notification');

      await ask.first().locator('.monaco-button', { hasText: /^Allow once$/ }).click();
      await rowShows(line, 'completed');
      assert.equal(hits, 1, 'the origin was reached, once');
      assert.equal(await notification(`connect to 127.0.0.1:${port}`).count(), 0, 'the notification is gone');
      const decision = `connect to 127.0.0.1:${port} · allowed once · by you`;
      await rowShows(decision, decision);
      const rows = await treeRows();
      const handleAt = rows.findIndex((r) => r.text.includes(id));
      const decisionAt = rows.findIndex((r) => r.text.includes(decision));
      assert.ok(handleAt >= 0 && decisionAt > handleAt && rows[decisionAt].level === rows[handleAt].level + 1, `the decision is the handle's child: ${JSON.stringify(rows)}`);
      await screenshot('approval-decision-row');

      // The command's output shows the body it fetched.
      const row = treeRow(line).first();
      await row.hover();
      await row.locator('.action-label[aria-label="Open Output"]').click();
      const shown = async () => editorText(await page.locator('.editor-group-container .monaco-editor .view-lines').allInnerTexts());
      await until('the output to show the fetched body', async () => (await shown()).includes('asked-origin-body'));
      assert.ok((await shown()).includes(id));
      assert.match(serverLog(), new RegExp(`Answered \\S+: allow once\\.`));
      await screenshot('approval-output');
    } finally {
      origin.close();
    }
  });

  test('Developer: Reload Window mid-command: the command goes on, the Tools view shows it running with its output so far, then its end, once', async () => {
    const id = `reload${Math.floor(Math.random() * 1e9)}`;
    // It prints, waits for a gate the test creates after the reload, prints again.
    const line = `sh -c "echo before-${id}; until [ -e .gates/${id} ]; do sleep 0.05; done; echo after-${id}"`;
    const fronts = () => pidsWithArg(`bin/toolhost\0--root\0${WS}\0`);
    const shown = async () => editorText(await page.locator('.editor-group-container .monaco-editor .view-lines').allInnerTexts());
    await runPalette('Notifications: Clear All Notifications');
    await page.locator('.statusbar-item', { hasText: /\d+ running/ }).first().click(); // the Tools view
    await runPalette('Toolhost: Run Command');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible' });
    await input.fill(line);
    await input.press('Enter');
    await pickWhere();
    await rowShows(line, 'running');
    let shells = [];
    await until('the command\'s shell', () => (shells = pidsWithArg(`before-${id}`)).length > 0);
    const [front] = fronts();
    assert.ok(front, 'a server process');
    // Its live output, open as the window reloads.
    const row = treeRow(line).first();
    await row.hover();
    await row.locator('.action-label[aria-label="Open Output"]').click();
    await until('the live output to show the first line', async () => (await shown()).includes(`before-${id}`));
    await screenshot('reload-before');
    const endedBefore = await endedRows();

    const loaded = page.waitForEvent('load', { timeout: 60_000 });
    await runPalette('Developer: Reload Window');
    await loaded;
    await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
    // The new window's server: another process, serving the same session.
    await until('the new window\'s server', () => fronts().length === 1 && fronts()[0] !== front, 90_000);
    await until('the extension to resume the session', () => /Resumed session s-\S+: its commands went on/.test(serverLog()), 30_000);
    assert.ok(!serverLog().includes('cannot be resumed'), 'no fallback to a new session');
    // The command was not restarted: the same shell runs.
    // The shell's forked children carry its argv for a moment before they
    // exec sleep, so the lists may differ by one of those: the shell itself
    // (the lowest pid, started first) must still run.
    const shell = Math.min(...shells);
    assert.ok(pidsWithArg(`before-${id}`).includes(shell), `the same shell (pid ${shell}) still running`);
    // The old window's extension ended its server by pid as it deactivated
    // (no shutdown, which would have ended the session): the holder saw the
    // front go, not its input end (the extension host dying without deactivate).
    const holderLog = readdirSync(path.join(STATE, 'toolhost'))
      .filter((f) => /^holder-.*\.log$/.test(f))
      .map((f) => readFileSync(path.join(STATE, 'toolhost', f), 'utf8'))
      .join('');
    assert.match(holderLog, /session detached.*reason="the front process is gone"/);
    assert.match(holderLog, /session resumed/);

    // The Tools view shows it running, once, with its output so far.
    await page.locator('.statusbar-item', { hasText: /\d+ running/ }).first().click();
    await rowShows(line, 'running', 60_000);
    await until('the status bar to say 1 running', async () => /1 running/.test(await page.locator('.statusbar-item', { hasText: /running/ }).first().innerText()));
    assert.equal(await treeRow(line).count(), 1, 'one row for the command');
    // The session's commands that had ended are back too, with their results
    // (here and on a destination): the same status and icon, once each. The
    // rows of earlier sessions (before a Restart Server), which ended with
    // their commands, were the old window's only.
    const same = (a, b) => a.label === b.label && a.status === b.status && a.icon === b.icon;
    await until('the rows of the session\'s commands that had ended', async () => {
      const after = await endedRows();
      const unknown = after.filter((r) => !endedBefore.some((b) => same(r, b)));
      if (unknown.length > 0) throw new Error(`rows not as before the reload: ${JSON.stringify(unknown)} (before: ${JSON.stringify(endedBefore)})`);
      return (endedBefore.length === 0 || after.length > 0) && after.every((r, i) => after.findIndex((o) => same(o, r)) === i);
    });
    // Its elapsed time goes on from before the reload, and ticks.
    const ticking = await treeRow(line).first().innerText();
    await until('the resumed handle\'s elapsed time to tick', async () => (await treeRow(line).first().innerText()) !== ticking, 10_000);
    await screenshot('reload-after-running');
    const tab = page.locator('.tabs-container .tab', { hasText: /sh -c .*\.log/ });
    const restored = (await tab.count()) > 0;
    if (restored) {
      // VS Code restored the live output's tab: it is followed again, from the start.
      await tab.first().click();
    } else {
      const again = treeRow(line).first();
      await again.hover();
      await again.locator('.action-label[aria-label="Open Output"]').click();
    }
    await until('the live output to show the output so far', async () => (await shown()).includes(`before-${id}`));
    assert.ok(!(await shown()).includes(`after-${id}`), 'the command waits on its gate');
    await screenshot(`reload-output-so-far${restored ? '-restored-tab' : ''}`);

    // It goes on: its next line, its end, its result, once.
    writeFileSync(path.join(GATES, id), '');
    await until('the live output to show the later line', async () => (await shown()).includes(`after-${id}`));
    await rowShows(line, 'completed');
    await until('the live output to say the command ended', async () => (await shown()).includes('the command ended: end of output'));
    assert.equal(await treeRow(line).count(), 1, 'still one row');
    await runPalette('Toolhost: Show Results');
    // Without white space: the panel wraps the long line.
    const flat = (t) => t.replace(/\s+/g, '');
    const channel = async () => flat(editorText(await page.locator('.part.panel .monaco-editor .view-lines').allInnerTexts()));
    const entry = flat(`${line}: completed`);
    await until('the result in the output channel', async () => (await channel()).includes(entry));
    assert.equal((await channel()).split(entry).length - 1, 1, 'the result reported once');
    await screenshot('reload-completed');
  });

  test('a session the server no longer has: the extension starts a new one, without a word to the user', async () => {
    await runPalette('Notifications: Clear All Notifications');
    const session = () => serverLog().match(/Session (s-\S+): it outlives|Resumed session (s-\S+)/g) ?? [];
    const known = session().length;
    // The holder goes, ending its sessions: the server's connection ends
    // (a crash, to the extension), and the restarted server's resume meets
    // -32030 SessionNotFound.
    await endHolders();
    await until('the extension to start a new session', () => serverLog().includes('cannot be resumed (') && session().length > known, 60_000);
    assert.match(serverLog(), /The session s-\S+ cannot be resumed \((ended|unknown)\): starting a new session\./);
    const toasts = await page.locator('.notifications-toasts .notification-toast').allInnerTexts();
    assert.deepEqual(toasts.filter((t) => /toolhost|server/i.test(t)), [], 'no error shown');
    await runPalette('Toolhost: Run Command');
    const input = page.locator('.quick-input-widget .quick-input-box input');
    await input.waitFor({ state: 'visible' });
    await input.fill('echo fresh-session');
    await input.press('Enter');
    await pickWhere();
    await rowShows('echo fresh-session', 'completed');
    const later = await page.locator('.notifications-toasts .notification-toast').allInnerTexts();
    assert.deepEqual(later.filter((t) => /toolhost|server/i.test(t) && !t.includes('fresh-session')), [], 'no error shown later either');
    await screenshot('session-gone-new-session');
  });
});
