// Command toolhost is the safe hands of an agent in a workspace: a JSON-RPC
// 2.0 server on stdio that runs commands, cancels them for real, reads and
// writes files confined to a workspace, and reports progress while work runs.
//
// Usage:
//
//	toolhost [flags]        serve one session on stdin/stdout: toolhost's JSON-RPC
//	                        protocol, or MCP when the first message is an MCP
//	                        initialize or server/discover
//	toolhost mcp [flags]    serve the Model Context Protocol on stdin/stdout
//	toolhost demo [flags]   play a short session against a temporary workspace
//	                        (demo --mcp: an MCP session)
//
// Run toolhost --help for the flags. Stdout belongs to the protocol: every
// log goes to stderr or --log-file. The command itself is package
// internal/cmd.
package main

import (
	"os"

	"github.com/toolhost/toolhost/internal/cmd"
)

// version is the server version; release builds set it with -ldflags.
var version = "0.1.0-dev"

func main() {
	os.Exit(cmd.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, version))
}
