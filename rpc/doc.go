// Package rpc serves toolhost's JSON-RPC protocol: the method table with
// typed handlers ([Table]), and the server that owns a session's dispatch
// (conn.go: one read loop, one table of requests in flight, one writer),
// its lifecycle and its outbox of notifications. It takes
// go.lsp.dev/jsonrpc2's message views, ids and output framing.
//
// The vocabulary it serves (params, results, method names, error codes)
// is package protocol's; rpc knows nothing of the tools it serves: they
// register into a [Table].
package rpc
