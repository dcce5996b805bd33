// Package tools serves one session of toolhost: the handlers of its
// methods, and the state they share (Tools). package main, the MCP front
// (mcp) and a persisted session's holder (persist) each build a Tools with
// New and serve it through an rpc.Table (Table, NewServer); the handlers
// turn wire params into calls on packages workspace, process, snapshot and
// hub, and their results and events back into wire types and
// notifications.
//
// A map, by file:
//
//   - The methods, one file each: runCommand (runcommand.go, with yieldMs),
//     longRunning (its handle's one toolResult: sendToolResult), cancel,
//     wait, readOutput, readFile, writeFile, progress; writeInput, resize
//     and signal (input.go); the snapshot methods (snapshots.go);
//     destinations and sessions (destinations.go, session.go). register in
//     tools.go lists them all; debug.go adds the test-only debug methods.
//   - Initialize (initialize.go) runs in three steps: checkInitialize
//     checks every option and resolves the roots (roots.go: the command
//     line's --root and --read-root, which a client may narrow, never
//     widen) before anything is opened; openSession opens the artifacts
//     directory, the workspace, the confinement and the process manager,
//     undoing them all if one fails; then Initialize installs them, and
//     initializeResult answers. Shutdown ends the commands, then removes
//     what openSession made.
//   - Confinement (sandbox.go, network.go): --sandbox auto, required or off;
//     a filesystem mode (full, workspace-write, read-only), the network
//     (on, off, or an allow-list), the protected and hidden paths and the
//     resource limits (sandbox.Limits). Initialize fixes the session's
//     default from the command line, narrowed by
//     initializationOptions.sandbox; a request may tighten it further,
//     never loosen it (tighten, narrowLimits), and confine turns it into a
//     process.Confinement.
//   - The policy at every door (policy.go): the protect and denyRead lists
//     a command gets are kept by the server's own doors too (readFile,
//     writeFile, progress files, snapshots), so that what a command may not
//     read or change cannot be read or changed through the server either;
//     the lists hold even with --sandbox off.
//   - Repositories (repos.go): a "**/.git/NAME" protect entry protects NAME
//     in every repository under the root, found by a gitrepos scan before
//     each command (cached per session, refreshed by inotify) and checked
//     again after it.
//   - Caches (caches.go): a workspace-write command's Go, npm and pip
//     caches live in a directory of its root that outlives the session
//     (Config.RootCache), else in the session's directory.
//   - Destinations (routes.go, destinations.go): a request may be another
//     toolhost's, named by its destination param or by an id or path that
//     destination handed out ("NAME/h-3", "NAME//abs/path"). register wraps
//     each such method with forwarded and its route, so the handlers serve
//     this server's requests only; package hub holds the connections.
//   - Snapshots (snapshots.go): the content-addressed store of package
//     snapshot, opened at its first use; snapshot, restore, diff, list,
//     drop and export, and a command run with snapshot: true answers the
//     changes it made.
//   - Events and results (events.go, result.go, progressfile.go,
//     logforward.go): a command's events become stepTransition, output,
//     port and $/progress notifications, its result the wire ToolResult, a
//     recipe's progress a file rewritten whole, and the session's warnings
//     window/logMessage.
package tools
