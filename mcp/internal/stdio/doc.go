// Package stdio is the MCP stdio transport toolhost serves the SDK's
// server on, and what it carries that the SDK cannot:
//
//   - transport.go: one JSON-RPC message per line, made to survive bad
//     input (a parse error, an invalid request or a line over the limit is
//     answered, and the session goes on); an [Outlet] writes the
//     notifications the SDK has no method for;
//   - lift.go: what the SDK's request types would drop while decoding
//     (tools/call's task, a listen's id and taskIds) is lifted into a
//     _meta key only the transport may set, read back with [LiftedOf];
//   - splice.go: large strings of results travel still encoded, held by a
//     [Splicer] and put in place as the answer is written, which also says
//     when that answer is on the wire.
//
// It imports the SDK and nothing of toolhost: package mcp uses it.
package stdio
