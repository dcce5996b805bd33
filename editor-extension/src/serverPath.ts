import { accessSync, constants, statSync } from 'node:fs';
import * as path from 'node:path';

/**
 * Finds the server binary: the `toolhost.serverPath` setting when set (a
 * leading ~ is the home directory), else `toolhost` on PATH, else the binary
 * shipped in the extension at bin/toolhost.
 */
export function resolveServerPath(setting: string, extensionPath: string, envPath = process.env.PATH ?? '', home = process.env.HOME ?? ''): string {
  const s = setting.trim();
  if (s) return s.startsWith('~/') && home ? path.join(home, s.slice(2)) : s;
  for (const dir of envPath.split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'toolhost');
    if (isExecutable(candidate)) return candidate;
  }
  return path.join(extensionPath, 'bin', 'toolhost');
}

function isExecutable(p: string): boolean {
  try {
    if (!statSync(p).isFile()) return false;
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The `toolhost.readRoots` setting as absolute paths: relative ones are taken from the workspace root. */
export function resolveReadRoots(setting: readonly unknown[], root: string): string[] {
  return setting
    .filter((r): r is string => typeof r === 'string' && r.trim() !== '')
    .map((r) => (r.startsWith('file://') ? r : path.resolve(root, r.trim())));
}
