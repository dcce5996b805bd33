// What the end-to-end tests in this directory share: a free port, the
// browser on code-server's workbench, and a wait on a condition that says
// what it waited for, with a screenshot of the page when it fails. (Not a
// test file: node --test runs *.test.mjs.)
import { createServer } from 'node:net';
import * as path from 'node:path';
import { chromium } from 'playwright-core';

/** Resolves to a TCP port free on 127.0.0.1 when it was asked. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

/**
 * Returns the test's screenshot function: each call saves the page page()
 * returns as dir/NN-name.png, numbered in order, and resolves to its path.
 */
export function screenshots(dir, page) {
  let shot = 0;
  return async (name) => {
    const file = path.join(dir, `${String(++shot).padStart(2, '0')}-${name}.png`);
    await page().screenshot({ path: file });
    return file;
  };
}

/**
 * Returns the test's until(what, cond, timeoutMs = 30 s): it polls an async
 * or sync condition until it holds, or fails at the deadline naming what it
 * waited for, the condition's last error, and the screenshot shoot() took
 * (none if it returns undefined or fails).
 */
export function poller(shoot) {
  return async (what, cond, timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs;
    let last;
    for (;;) {
      try {
        if (await cond()) return;
      } catch (e) {
        last = e;
      }
      if (Date.now() > deadline) {
        const file = await Promise.resolve()
          .then(shoot)
          .catch(() => undefined);
        throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}${file ? ` (screenshot: ${file})` : ''}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };
}

/**
 * Launches Chromium (the binary at executable, headless, its profile in
 * profileDir) on the code-server at base with folder open, and resolves to
 * its { browser, page } once the workbench shows (closed again if it
 * does not).
 */
export async function openWorkbench(executable, profileDir, base, folder) {
  const browser = await chromium.launchPersistentContext(profileDir, {
    executablePath: executable,
    headless: true,
    viewport: { width: 1440, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = browser.pages()[0] ?? (await browser.newPage());
    await page.goto(`${base}/?folder=${encodeURIComponent(folder)}`);
    await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
    return { browser, page };
  } catch (e) {
    await browser.close().catch(() => undefined); // the caller never gets it to close
    throw e;
  }
}
