// Package protocol is toolhost's wire vocabulary, and the single source of
// truth for it: the params and results of every method and notification,
// the method names paired with their Go types ([RequestType],
// [NotificationType]), and the error codes with the [Error] that carries
// them. It holds declarations only: serving them is package rpc's, calling
// them package client's.
//
// The files are split by area:
//
//	lifecycle.go     initialize and what it answers, $/cancelRequest, log messages
//	commands.go      runCommand and longRunning, steps, the ToolResult
//	handles.go       what a detached command is asked while it runs, and what it sends
//	files.go         readFile and writeFile
//	sandbox.go       what a command asks of the sandbox, and what was applied
//	destinations.go  the other machines a session drives
//	approvals.go     asking the client's user, and the allows remembered
//	mounts.go        buckets shown to commands as files, and the manifest
//	workdone.go      LSP work-done progress ($/progress)
//	errors.go        the error codes and ErrorData, the data every error carries
//	error.go         Error, the Go error that carries a code, and sentinels for errors.Is
//	methods.go       the method names, and each method paired with its types
//
// `go generate ./protocol` writes from these files, with internal/tsgen,
// the extension's editor-extension/src/protocol.ts and the reference part
// of PROTOCOL.md; a test in internal/tsgen fails when either drifts.
//
// It imports only the standard library, and every package of toolhost may
// import it.
package protocol

//go:generate go run ../internal/tsgen -out ../editor-extension/src/protocol.ts -md ../PROTOCOL.md -codes errors.go lifecycle.go commands.go handles.go files.go sandbox.go destinations.go sessions.go snapshots.go approvals.go mounts.go workdone.go methods.go errors.go
