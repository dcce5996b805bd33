// Package mcp serves toolhost over the Model Context Protocol on stdio,
// with the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// The MCP server is a protocol adapter. Each session runs toolhost's own
// JSON-RPC server in the same process, over a pair of in-memory pipes, and
// talks to it with the public Go client of package client. Every promise of
// the JSON-RPC protocol therefore holds unchanged under MCP: the workspace
// root and read roots, the sandbox and limits, the artifacts, the one
// toolResult of each handle, and no process outliving the session. This
// package only maps one protocol onto the other:
//
//   - the first tools/call or resources/read opens toolhost's session
//     (initialize), with the client's MCP roots, which may narrow the
//     workspace, never widen it (workspace.go);
//   - each tool is one toolhost request (tools.go), and its answer becomes a
//     short text for the model, the structured result and resource_links
//     to the artifacts (results.go);
//   - snapshot_workspace, restore_snapshot and diff_snapshot are
//     toolhost's snapshot, restore and diff, offered when the server keeps
//     snapshots, as is snapshot: true on run_command and start_command,
//     whose result's text then names the changes (snapshots.go);
//   - a progress token gets notifications/progress from the command's step
//     transitions and heartbeats (progress.go);
//   - notifications/cancelled cancels the toolhost request, or the handle,
//     so that the command's whole tree ends;
//   - artifacts are resources, toolhost://artifacts/{commandId}/{stream},
//     read in pages of lines (resources.go);
//   - a start_command or run_command may become an MCP task (tasks.go,
//     taskmethods.go; the wire types in internal/taskwire): the 2025-11-25 experimental tasks, or
//     the 2026-07-28 extension io.modelcontextprotocol/tasks. A task is its
//     command's handle: same id, states from the handle's one toolResult
//     (decided once, under the task table's lock), and the result
//     run_command would have answered. The task table reaches the session
//     only through a small interface (backend, in tasks.go). The SDK has
//     no tasks: a receiving middleware and custom methods add them, and
//     the stdio transport (internal/stdio) carries what the SDK's types
//     cannot;
//   - toolhost's approval/request (issue 35: a confined command connects
//     to a host:port its allow-list does not name) becomes a form
//     elicitation on the tool call whose command asked, for a client that
//     can elicit; a task shows input_required meanwhile; any other client
//     is never asked, and the result's text names the flag its user can
//     add (approvals.go);
//   - a destination argument runs a command, or reads and writes a file, on
//     a destination of --destination;
//   - the end of stdin ends toolhost's session, which ends every process;
//   - under --persist (Options.Shared) a Server outlives its connections:
//     a holder (package persist) keeps one per user, root and command
//     line, serves each MCP connection on it (ServeConn), and closes it
//     after --linger without any (Close). Its connections share the
//     toolhost session and the task table; each has its own splicer and
//     outlet (conn). A task id is then the handle's, a dot and 128 random
//     bits: it is what reaches the task from a later connection.
//
// What extends the SDK lives under internal/: the stdio transport with its
// lift and splice (internal/stdio), and the task wire types
// (internal/taskwire). Neither imports anything of toolhost.
//
// [IsMCP] tells an MCP client's first message from one of toolhost's own
// protocol, so that plain toolhost can hand the connection over.
package mcp
