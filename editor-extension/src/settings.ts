import type { InitializationOptions, Sandbox, SandboxFilesystem } from './protocol';
import { resolveReadRoots } from './serverPath';

const filesystems: readonly SandboxFilesystem[] = ['workspace-write', 'read-only', 'full'];

/**
 * readSandboxSetting checks the `toolhost.sandbox` setting and returns the
 * sandbox to send, or undefined when it asks for nothing. A value it cannot
 * read throws an error naming the setting: a mistyped key or mode must stop
 * the server from starting rather than leave commands less confined than the
 * user asked.
 */
export function readSandboxSetting(v: unknown): Sandbox | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isRecord(v)) throw new Error('toolhost.sandbox must be an object such as {"filesystem": "read-only", "network": false}');
  const sandbox: Sandbox = {};
  for (const [key, value] of Object.entries(v)) {
    if (key === 'filesystem') {
      const fs = filesystems.find((f) => f === value);
      if (!fs) throw new Error(`toolhost.sandbox.filesystem must be "workspace-write", "read-only" or "full", not ${JSON.stringify(value)}`);
      sandbox.filesystem = fs;
    } else if (key === 'network') {
      if (typeof value !== 'boolean') throw new Error(`toolhost.sandbox.network must be true or false, not ${JSON.stringify(value)}`);
      sandbox.network = value;
    } else {
      throw new Error(`toolhost.sandbox has an unknown key "${key}": only "filesystem" and "network"`);
    }
  }
  return Object.keys(sandbox).length > 0 ? sandbox : undefined;
}

/** The flags the extension gives the server itself: toolhost.serverArgs may not. */
const ownFlags = ['root', 'framing'];

/**
 * readServerArgs checks the `toolhost.serverArgs` setting and returns the
 * arguments to put after the extension's own (`--root <folder> --framing
 * header`). It must be an array of non-empty strings, and may not give
 * `--root` or `--framing`, in any spelling (`-root`, `--root=x`): the
 * extension owns them. The server refuses anything else it does not know,
 * so a mistake there stops it from starting with its own message. A value
 * it cannot take throws an error naming the setting.
 */
export function readServerArgs(v: unknown): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new Error('toolhost.serverArgs must be an array of strings such as ["--destination", "build=ssh -T build1 toolhost --root /srv/ws"]');
  return v.map((a, i) => {
    if (typeof a !== 'string' || a === '') throw new Error(`toolhost.serverArgs[${i}] must be a non-empty string, not ${JSON.stringify(a)}`);
    const flag = /^--?([^=]+)/.exec(a)?.[1];
    if (flag !== undefined && ownFlags.includes(flag)) {
      throw new Error(`toolhost.serverArgs[${i}] gives ${a.split('=')[0]}, which the extension sets itself (the first workspace folder, header framing)`);
    }
    return a;
  });
}

/** The settings initializationOptions are made of, as `getConfiguration('toolhost')` gives them. */
export interface Settings {
  readRoots: readonly unknown[];
  sandbox: unknown;
}

/**
 * initializationOptions is what initialize sends for the settings: the read
 * roots resolved against the workspace root, and the sandbox when one is set.
 * It throws, naming the setting, when `toolhost.sandbox` cannot be read.
 */
export function initializationOptions(settings: Settings, root: string): InitializationOptions {
  const options: InitializationOptions = { readRoots: resolveReadRoots(settings.readRoots, root) };
  const sandbox = readSandboxSetting(settings.sandbox);
  if (sandbox) options.sandbox = sandbox;
  return options;
}

/** The settings that fill initializationOptions, by the option's name. */
const settingOfOption: Record<string, string> = {
  readRoots: 'toolhost.readRoots',
  sandbox: 'toolhost.sandbox',
};

/**
 * refusedSetting names the setting an initialize error is about, from the
 * field the server names in `data.field` ("initializationOptions.sandbox",
 * "initializationOptions.readRoots[0]", …), with what the server says of it;
 * undefined when the error is about no setting. It reads the error's shape,
 * not its class, so that it works with any copy of vscode-jsonrpc.
 */
export function refusedSetting(e: unknown): { setting: string; detail: string } | undefined {
  if (!isRecord(e) || !isRecord(e.data) || typeof e.data.field !== 'string') return undefined;
  const field = e.data.field;
  const m = /^initializationOptions\.([A-Za-z]+)/.exec(field);
  const setting = m ? settingOfOption[m[1]] : undefined;
  if (!setting) return undefined;
  const message = typeof e.message === 'string' ? e.message : '';
  const reason = typeof e.data.reason === 'string' ? e.data.reason : '';
  // InvalidParams says "invalid params: <field>: <reason>"; other errors say
  // what is wrong in the message and what to do in the reason.
  const detail = reason && message.includes(reason) ? `${field}: ${reason}` : [message || field, reason && `(${reason})`].filter(Boolean).join(' ');
  return { setting, detail };
}

/**
 * initializeFailure is the message the user sees when the server refuses to
 * start: it names the setting the server refused, and for the sandbox says
 * that the setting can only tighten what the server's command line allows.
 * detail is the error in words, for an error about no setting.
 */
export function initializeFailure(e: unknown, command: string, detail: string): string {
  const refused = refusedSetting(e);
  if (!refused) return `Toolhost: the server (${command}) did not start: ${detail}`;
  const msg = `Toolhost: the server refused the ${refused.setting} setting: ${refused.detail.replace(/\.$/, '')}.`;
  if (refused.setting !== 'toolhost.sandbox') return msg;
  return `${msg} It can only tighten the confinement the server's command line allows (--sandbox-default, --sandbox-network), never loosen it: change or remove it.`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
