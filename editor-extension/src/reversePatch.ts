/**
 * The server has no "read a file from a snapshot" method: `diff {from,
 * path}` answers a unified diff of that one text file, the snapshot ("a")
 * against the root now ("b"). The file as the snapshot holds it is then the
 * file now with that patch applied backwards: reversePatch.
 *
 * The patch is the server's (snapshot/udiff.go): `--- a/…` and `+++ b/…`
 * headers (`/dev/null` for a side without the file), hunks `@@ -s,n +s,n
 * @@` whose lines start with " ", "-" or "+", and a last line without a
 * newline followed by `\ No newline at end of file`, as diff(1) writes it.
 */

/** PatchMismatch says the text is not the patch's "after": it changed since the patch was made. */
export class PatchMismatch extends Error {}

/** One line of a hunk: its op and its text, with its newline unless the file ends without one there. */
interface HunkLine {
  op: ' ' | '-' | '+';
  text: string;
}

/** A hunk: where it starts on each side (0-based line index) and its lines. */
export interface Hunk {
  oldStart: number;
  oldCount: number;
  newStart: number;
  newCount: number;
  lines: HunkLine[];
}

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

/**
 * parsePatch reads the hunks of a unified diff of one file; what comes
 * before the first hunk (the headers) is skipped. A hunk is read by the
 * counts its header gives, so a removed line that reads "--- x" is not
 * taken for a header. It throws on a malformed patch.
 */
export function parsePatch(patch: string): Hunk[] {
  const lines = patch.split('\n');
  // A patch ends with a newline: the last element is "".
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  const hunks: Hunk[] = [];
  let i = 0;
  while (i < lines.length && !lines[i].startsWith('@@')) i++;
  while (i < lines.length) {
    const m = HUNK.exec(lines[i]);
    if (!m) throw new Error(`malformed patch: expected a hunk header at line ${i + 1}: ${JSON.stringify(lines[i])}`);
    const oldCount = m[2] === undefined ? 1 : Number(m[2]);
    const newCount = m[4] === undefined ? 1 : Number(m[4]);
    // An empty side's start is the line after which it would be (0 before
    // the first); a side with lines gives its first, 1-based.
    const hunk: Hunk = {
      oldStart: oldCount === 0 ? Number(m[1]) : Number(m[1]) - 1,
      oldCount,
      newStart: newCount === 0 ? Number(m[3]) : Number(m[3]) - 1,
      newCount,
      lines: [],
    };
    i++;
    let olds = 0;
    let news = 0;
    while (olds < oldCount || news < newCount) {
      if (i >= lines.length) throw new Error(`malformed patch: a hunk ends early (want -${oldCount} +${newCount}, got -${olds} +${news})`);
      const l = lines[i];
      const op = l[0];
      if (op !== ' ' && op !== '-' && op !== '+') throw new Error(`malformed patch: line ${i + 1} starts with ${JSON.stringify(op ?? '')}`);
      i++;
      // "\ No newline at end of file" says this line has none.
      const noNewline = i < lines.length && lines[i].startsWith('\\');
      if (noNewline) i++;
      hunk.lines.push({ op, text: l.slice(1) + (noNewline ? '' : '\n') });
      if (op !== '+') olds++;
      if (op !== '-') news++;
    }
    if (olds !== oldCount || news !== newCount) throw new Error(`malformed patch: a hunk has -${olds} +${news} lines, its header says -${oldCount} +${newCount}`);
    hunks.push(hunk);
  }
  return hunks;
}

/** splitLines splits after each newline, keeping it; the last line may lack one. */
export function splitLines(s: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (;;) {
    const nl = s.indexOf('\n', start);
    if (nl < 0) break;
    out.push(s.slice(start, nl + 1));
    start = nl + 1;
  }
  if (start < s.length) out.push(s.slice(start));
  return out;
}

/**
 * reversePatch is the text before a patch, given the text after it: each
 * hunk's "+" lines are taken out and its "-" lines put back; what lies
 * between the hunks is the text's own. A context or "+" line that is not
 * what the text has there throws PatchMismatch (the file changed since the
 * patch was made), rather than give a wrong "before". An empty patch
 * changes nothing.
 */
export function reversePatch(after: string, patch: string): string {
  const now = splitLines(after);
  const out: string[] = [];
  let pos = 0; // the next line of `now` not yet used
  for (const h of parsePatch(patch)) {
    if (h.newStart < pos || h.newStart > now.length) {
      throw new PatchMismatch(`a hunk starts at line ${h.newStart + 1}, outside the file (${now.length} lines, next ${pos + 1})`);
    }
    while (pos < h.newStart) out.push(now[pos++]);
    for (const l of h.lines) {
      if (l.op === '-') {
        out.push(l.text);
        continue;
      }
      if (now[pos] !== l.text) {
        throw new PatchMismatch(`line ${pos + 1} is ${JSON.stringify(now[pos] ?? '(end of file)')}, the patch says ${JSON.stringify(l.text)}`);
      }
      if (l.op === ' ') out.push(l.text);
      pos++;
    }
  }
  while (pos < now.length) out.push(now[pos++]);
  return out.join('');
}
