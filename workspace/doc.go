// Package workspace confines file access to one workspace root, a list of
// read-only roots and an optional read-only artifacts directory.
//
// Every file the package opens is opened through an [os.Root] handle held for
// each root, so the kernel — not a check on a name made earlier — decides that
// a path stays inside. Path parameters are first resolved component by
// component (through the same handles, never with a lexical clean) so that
// errors can say why a path was refused and results can name the absolute real
// path; the open that follows uses the resolved name and is confined by the
// handle again, so a directory swapped for a symlink in between is refused
// rather than followed.
//
// Rules that hold for every method:
//
//   - A relative path is relative to the workspace root. An absolute path (or a
//     file:// URI, percent-decoded) must start, on whole path components, with
//     a root's resolved real path or with the spelling the root was configured
//     with; "/a/root2" is not inside "/a/root".
//   - ".." climbs through real directories, the way the kernel does it:
//     "link/../x" where link points outside is refused, never cleaned to "x".
//   - A symlink is followed only while it leads inside a root; an absolute
//     target is matched like an absolute path, so a link from the workspace
//     into a read root is readable (and read-only).
//   - A path beginning "file:" is taken as a URI; a file whose name starts
//     so is reached as "./file:name".
//   - A leading "~", a NUL byte, a path of PATH_MAX bytes or more and any path
//     under /proc are refused with [ErrOutside].
//
// Hard links: a hard link inside a root is the same file as its target, wherever
// the target lives; no path check can tell it apart, so readFile reads it
// (unless the Policy denies its target: see below). WriteFile replaces the
// directory entry atomically (write a temporary file, rename it over the
// target), so after a write the other names of a hard-linked file keep the old
// content.
//
// # Policy
//
// A Workspace may also hold a [Policy] (SetPolicy): denyRead paths no method
// reads or writes, and protect paths no method writes, inside the roots. It is
// asked in resolve, where every method's path is resolved, so that a new method
// cannot leave it out:
//
//   - each component resolve Lstats is matched by device and inode against the
//     entries as they were when the policy was set: another name of a denied
//     directory (renamed since, bind-mounted, a case variant on a
//     case-insensitive filesystem) is refused;
//   - the real path resolve ends at is matched by name, on whole components,
//     against each entry as configured and as its real path: an entry made
//     after the policy was set, a file still to be created;
//   - for a write, each of Policy.Repos protects its path in every git
//     directory: one named .git, and those under .git/modules and
//     .git/worktrees, in any case, whether they exist yet or not; and any
//     existing directory git would take for one (a HEAD, and objects/ or a
//     commondir file: a bare repository, a worktree's git directory);
//   - ReadFile checks the descriptor it opened is the file resolve looked at
//     (else ErrConflict), and that a file with more than one link is not one of
//     the files under the denyRead entries (a hard link), walking them once and
//     again when one of their directories changed; past maxLinkScan entries such
//     a file is refused, since it cannot be told apart.
//
// A refusal wraps ErrPolicy; its PathError names the policy and the entry.
// Writes need no hard-link check: a write renames a new file over the name, so
// a protected file's other names keep their content.
package workspace
