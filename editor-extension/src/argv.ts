/**
 * Splits a command line into argv the way a POSIX shell splits words, without
 * running a shell: no globbing, no variables, no operators (`|`, `;`, `>` are
 * plain characters).
 *
 * - blanks (space, tab, newline) separate words;
 * - '…' keeps everything literally;
 * - "…" keeps everything except that a backslash escapes `"`, `\`, `$`, `` ` ``
 *   and a newline (which it removes); other backslashes stay;
 * - outside quotes a backslash escapes the next character (a backslash-newline
 *   is removed);
 * - `""` and `''` make an empty argument.
 */
export function splitArgv(line: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false; // distinguishes an empty quoted word from no word
  let i = 0;
  const n = line.length;
  while (i < n) {
    const c = line[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      if (inWord) {
        words.push(word);
        word = '';
        inWord = false;
      }
      i++;
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new ArgvError('unterminated single quote', i);
      word += line.slice(i + 1, end);
      inWord = true;
      i = end + 1;
    } else if (c === '"') {
      const start = i;
      i++;
      for (;;) {
        if (i >= n) throw new ArgvError('unterminated double quote', start);
        const d = line[i];
        if (d === '"') break;
        if (d === '\\' && i + 1 < n) {
          const e = line[i + 1];
          if (e === '\n') {
            i += 2;
            continue;
          }
          if (e === '"' || e === '\\' || e === '$' || e === '`') {
            word += e;
            i += 2;
            continue;
          }
        }
        word += d;
        i++;
      }
      inWord = true;
      i++;
    } else if (c === '\\') {
      if (i + 1 >= n) throw new ArgvError('trailing backslash', i);
      if (line[i + 1] !== '\n') {
        word += line[i + 1];
        inWord = true;
      }
      i += 2;
    } else {
      word += c;
      inWord = true;
      i++;
    }
  }
  if (inWord) words.push(word);
  return words;
}

/** A command line that cannot be split; offset is where the problem starts. */
export class ArgvError extends Error {
  constructor(
    reason: string,
    readonly offset: number,
  ) {
    super(`${reason} (at character ${offset + 1})`);
    this.name = 'ArgvError';
  }
}

/** Quotes argv back into a line that splitArgv turns into the same argv. */
export function joinArgv(argv: readonly string[]): string {
  return argv.map((a) => (a !== '' && /^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}
