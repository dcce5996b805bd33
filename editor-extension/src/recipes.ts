import type { LongRunningParams, ProgressFileOption, StepSpec } from './protocol';

/** A recipe file: .toolhost/recipes/<name>.json in the workspace. */
export interface Recipe {
  label: string;
  steps: StepSpec[];
  /**
   * ProgressFile asks the server to keep a progress file for the recipe:
   * a path in the root, or true for one beside its artifacts.
   */
  progressFile?: ProgressFileOption;
}

/**
 * Parses and checks a recipe file's text; the error names the file and the
 * field that is wrong.
 */
export function parseRecipe(text: string, file: string): Recipe {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new Error(`${file}: not JSON: ${(e as Error).message}`);
  }
  const fail = (field: string, want: string): never => {
    throw new Error(`${file}: ${field} must be ${want}`);
  };
  if (!isObject(raw)) return fail('the recipe', 'an object');
  if (typeof raw.label !== 'string' || raw.label === '') fail('label', 'a non-empty string');
  if (!Array.isArray(raw.steps) || raw.steps.length === 0) fail('steps', 'a non-empty array');
  const steps = (raw.steps as unknown[]).map((s, i): StepSpec => {
    const at = `steps[${i}]`;
    if (!isObject(s)) return fail(at, 'an object');
    if (typeof s.name !== 'string' || s.name === '') fail(`${at}.name`, 'a non-empty string');
    if (!Array.isArray(s.argv) || s.argv.length === 0 || !s.argv.every((a) => typeof a === 'string')) {
      fail(`${at}.argv`, 'a non-empty array of strings');
    }
    const step: StepSpec = { name: s.name as string, argv: s.argv as string[] };
    if (s.cwd !== undefined) {
      if (typeof s.cwd !== 'string') fail(`${at}.cwd`, 'a string');
      step.cwd = s.cwd as string;
    }
    if (s.env !== undefined) {
      if (!isObject(s.env) || !Object.values(s.env).every((v) => v === null || typeof v === 'string')) {
        fail(`${at}.env`, 'an object of strings (null unsets)');
      }
      step.env = s.env as Record<string, string | null>;
    }
    if (s.pty !== undefined) {
      const p = s.pty;
      const size = (n: unknown) => Number.isInteger(n) && (n as number) >= 1 && (n as number) <= 10000;
      if (typeof p !== 'boolean' && !(isObject(p) && size(p.rows) && size(p.cols) && Object.keys(p).length === 2)) {
        fail(`${at}.pty`, 'true, false or {"rows": 1-10000, "cols": 1-10000}');
      }
      step.pty = typeof p === 'boolean' ? p : { rows: (p as { rows: number }).rows, cols: (p as { cols: number }).cols };
    }
    if (s.continueOnError !== undefined) {
      if (typeof s.continueOnError !== 'boolean') fail(`${at}.continueOnError`, 'a boolean');
      step.continueOnError = s.continueOnError as boolean;
    }
    return step;
  });
  const recipe: Recipe = { label: raw.label as string, steps };
  if (raw.progressFile !== undefined) {
    const pf = raw.progressFile;
    if (typeof pf !== 'boolean' && (typeof pf !== 'string' || pf === '')) fail('progressFile', 'true, false or a path in the workspace');
    if (pf !== false) recipe.progressFile = pf as ProgressFileOption;
  }
  return recipe;
}

/** usesPty says a step of the recipe runs in a pseudo-terminal. */
export function usesPty(params: LongRunningParams): boolean {
  const on = (p: LongRunningParams['pty']) => p !== undefined && p !== false;
  return (params.argv?.length ?? 0) > 0 ? on(params.pty) : (params.steps ?? []).some((s) => on(s.pty ?? params.pty));
}

/**
 * The longRunning params that run a recipe: its steps, and an empty argv
 * (the server takes argv or steps, and an empty argv is none).
 */
export function recipeParams(recipe: Recipe): LongRunningParams {
  const params: LongRunningParams = { argv: [], label: recipe.label, steps: recipe.steps };
  if (recipe.progressFile !== undefined) params.progressFile = recipe.progressFile;
  return params;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
