import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ArgvError, joinArgv, splitArgv } from '../src/argv';

const cases: [string, string[]][] = [
  ['', []],
  ['   \t ', []],
  ['ls', ['ls']],
  ['  ls   -la  /tmp ', ['ls', '-la', '/tmp']],
  ["echo 'hello world'", ['echo', 'hello world']],
  ["echo 'a \"b\" \\n c'", ['echo', 'a "b" \\n c']],
  ['echo "hello   world"', ['echo', 'hello   world']],
  ['echo "say \\"hi\\""', ['echo', 'say "hi"']],
  ['echo "back\\\\slash"', ['echo', 'back\\slash']],
  ['echo "\\$HOME \\`x\\`"', ['echo', '$HOME `x`']],
  ['echo "keep \\n and \\t"', ['echo', 'keep \\n and \\t']],
  ['echo a\\ b', ['echo', 'a b']],
  ['echo \\"quoted\\"', ['echo', '"quoted"']],
  ["echo \\'", ['echo', "'"]],
  ['echo "" \'\' x', ['echo', '', '', 'x']],
  ['a"b c"d\'e f\'g', ['ab cde fg']],
  ['sh -c "echo $HOME | wc -c; exit 3"', ['sh', '-c', 'echo $HOME | wc -c; exit 3']],
  ['ls *.go > out', ['ls', '*.go', '>', 'out']],
  ['one \\\ntwo', ['one', 'two']],
  ['"multi\nline"', ['multi\nline']],
  ['caf\u00e9 \u2713', ['caf\u00e9', '\u2713']],
];

for (const [line, want] of cases) {
  test(`splitArgv(${JSON.stringify(line)})`, () => {
    assert.deepEqual(splitArgv(line), want);
  });
}

for (const bad of ["echo 'open", 'echo "open', 'echo \\', 'echo "a\\"']) {
  test(`splitArgv(${JSON.stringify(bad)}) throws`, () => {
    assert.throws(() => splitArgv(bad), ArgvError);
  });
}

test('joinArgv round-trips through splitArgv', () => {
  for (const argv of [['ls'], ['echo', 'a b', '', "it's", '$x', 'q"uote', 'back\\slash', 'new\nline']]) {
    assert.deepEqual(splitArgv(joinArgv(argv)), argv);
  }
});
