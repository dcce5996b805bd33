import type { InitializationOptions, Sandbox, SandboxFilesystem } from './protocol';
import { resolveReadRoots } from './serverPath';

const filesystems: readonly SandboxFilesystem[] = ['workspace-write', 'read-only', 'full'];

/** SettingError is a setting the extension cannot read; setting names it, for Open Settings. */
export class SettingError extends Error {
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * readSandboxSetting checks the `toolhost.sandbox` setting and returns the
 * sandbox to send, or undefined when it asks for nothing. A value it cannot
 * read throws an error naming the setting: a mistyped key or mode must stop
 * the server from starting rather than leave commands less confined than the
 * user asked.
 */
export function readSandboxSetting(v: unknown): Sandbox | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isRecord(v)) throw new SettingError('toolhost.sandbox', 'toolhost.sandbox must be an object such as {"filesystem": "read-only", "network": false}');
  const sandbox: Sandbox = {};
  for (const [key, value] of Object.entries(v)) {
    if (key === 'filesystem') {
      const fs = filesystems.find((f) => f === value);
      if (!fs) throw new SettingError('toolhost.sandbox', `toolhost.sandbox.filesystem must be "workspace-write", "read-only" or "full", not ${JSON.stringify(value)}`);
      sandbox.filesystem = fs;
    } else if (key === 'network') {
      if (typeof value !== 'boolean') {
        throw new SettingError('toolhost.sandbox', `toolhost.sandbox.network must be true or false, not ${JSON.stringify(value)} (an allow-list of hosts goes in toolhost.networkAllow)`);
      }
      sandbox.network = value;
    } else {
      throw new SettingError('toolhost.sandbox', `toolhost.sandbox has an unknown key "${key}": only "filesystem" and "network"`);
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

/**
 * readNetworkAllow checks the `toolhost.networkAllow` setting and returns
 * its patterns ("host", "*.domain", either with ":port", or an IP literal
 * with an optional port). It checks only that they are strings: the server
 * owns the patterns' syntax, and refuses a malformed one at initialize
 * naming its index, which refusedSetting turns back into the entry. A value
 * that is not an array of strings throws an error naming the setting.
 */
export function readNetworkAllow(v: unknown): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new SettingError('toolhost.networkAllow', 'toolhost.networkAllow must be an array of host patterns such as ["proxy.golang.org", "*.npmjs.org", "127.0.0.1:8080"]');
  return v.map((p, i) => {
    if (typeof p !== 'string') throw new SettingError('toolhost.networkAllow', `toolhost.networkAllow[${i}] must be a string such as "example.com:443", not ${JSON.stringify(p)}`);
    return p;
  });
}

/** The settings initializationOptions are made of, as `getConfiguration('toolhost')` gives them. */
export interface Settings {
  readRoots: readonly unknown[];
  sandbox: unknown;
  /** toolhost.networkAllow; absent or empty narrows nothing. */
  networkAllow?: unknown;
}

/**
 * initializationOptions is what initialize sends for the settings: the read
 * roots resolved against the workspace root, and the sandbox when one is set.
 * A non-empty `toolhost.networkAllow` becomes the sandbox's network
 * `{allow: [...]}`, unless `toolhost.sandbox.network` is false, which is
 * stricter and stays. It throws, naming the setting, when `toolhost.sandbox`
 * or `toolhost.networkAllow` cannot be read.
 */
export function initializationOptions(settings: Settings, root: string): InitializationOptions {
  const options: InitializationOptions = { readRoots: resolveReadRoots(settings.readRoots, root) };
  let sandbox = readSandboxSetting(settings.sandbox);
  const allow = readNetworkAllow(settings.networkAllow);
  if (allow.length > 0 && sandbox?.network !== false) sandbox = { ...sandbox, network: { allow } };
  if (sandbox) options.sandbox = sandbox;
  return options;
}

/** The settings that fill initializationOptions, by the option's name. */
const settingOfOption: Record<string, string> = {
  readRoots: 'toolhost.readRoots',
  sandbox: 'toolhost.sandbox',
};

/** What refusedSetting says of an initialize error about a setting. */
export interface RefusedSetting {
  /** The setting: "toolhost.sandbox", "toolhost.networkAllow", … */
  setting: string;
  /** What the server said of it, with the field it named. */
  detail: string;
  /** For toolhost.networkAllow, the entry the server refused, when it named one. */
  entry?: { index: number; pattern: string };
}

/**
 * refusedSetting names the setting an initialize error is about, from the
 * field the server names in `data.field` ("initializationOptions.sandbox",
 * "initializationOptions.readRoots[0]", …), with what the server says of it;
 * undefined when the error is about no setting. The sandbox's network is
 * toolhost.networkAllow's when sent (the options initialize sent) has an
 * allow-list there, which only that setting makes; the server's
 * "….network.allow[2]" then names its entry. It reads the error's shape,
 * not its class, so that it works with any copy of vscode-jsonrpc.
 */
export function refusedSetting(e: unknown, sent?: InitializationOptions): RefusedSetting | undefined {
  if (!isRecord(e) || !isRecord(e.data) || typeof e.data.field !== 'string') return undefined;
  const field = e.data.field;
  const m = /^initializationOptions\.([A-Za-z]+)/.exec(field);
  let setting = m ? settingOfOption[m[1]] : undefined;
  if (!setting) return undefined;
  const message = typeof e.message === 'string' ? e.message : '';
  const reason = typeof e.data.reason === 'string' ? e.data.reason : '';
  const allow = allowListOf(sent);
  const net = /^initializationOptions\.sandbox\.network(?:\.allow(?:\[(\d+)\])?)?$/.exec(field);
  if (net && allow) {
    setting = 'toolhost.networkAllow';
    const index = net[1] === undefined ? -1 : Number(net[1]);
    if (index >= 0 && index < allow.length) {
      const pattern = allow[index];
      // The server's reason names the pattern ("malformed … entry \"*.\": …"); say it when it does not.
      const detail = reason.includes(JSON.stringify(pattern)) ? reason : `entry ${JSON.stringify(pattern)}: ${reason || message}`;
      return { setting, detail: `${detail} (${setting}[${index}])`, entry: { index, pattern } };
    }
    return { setting, detail: reason || message || field };
  }
  // InvalidParams says "invalid params: <field>: <reason>"; other errors say
  // what is wrong in the message and what to do in the reason.
  const detail = reason && message.includes(reason) ? `${field}: ${reason}` : [message || field, reason && `(${reason})`].filter(Boolean).join(' ');
  return { setting, detail };
}

/** allowListOf is the network allow-list initialize sent, if any. */
function allowListOf(sent: InitializationOptions | undefined): string[] | undefined {
  const n = sent?.sandbox?.network;
  return typeof n === 'object' && n !== null ? n.allow : undefined;
}

/**
 * initializeFailure is the message the user sees when the server refuses to
 * start: it names the setting the server refused (for toolhost.networkAllow,
 * the entry), and for the sandbox and the allow-list says that the setting
 * can only tighten what the server's command line allows. detail is the
 * error in words, for an error about no setting; sent is what initialize
 * sent.
 */
export function initializeFailure(e: unknown, command: string, detail: string, sent?: InitializationOptions): string {
  const refused = refusedSetting(e, sent);
  if (!refused) return `Toolhost: the server (${command}) did not start: ${detail}`;
  const msg = `Toolhost: the server refused the ${refused.setting} setting: ${refused.detail.replace(/\.$/, '')}.`;
  if (refused.setting === 'toolhost.networkAllow') {
    if (refused.entry) return `${msg} Fix or remove that entry; the server is not started.`;
    return `${msg} It can only narrow the network the server's command line allows (--sandbox-network, --network-allow), never widen it: change or remove it; the server is not started.`;
  }
  if (refused.setting !== 'toolhost.sandbox') return msg;
  return `${msg} It can only tighten the confinement the server's command line allows (--sandbox-default, --sandbox-network), never loosen it: change or remove it.`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
