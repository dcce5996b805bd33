// Package capture keeps what toolhost's commands print: it writes each
// command's output to artifact files, keeps a bounded inline head and tail
// per stream, and recognises the step markers a child writes on stderr or on
// its events pipe.
//
// Where things are:
//
//	artifacts*.go  Artifacts: the session's artifacts directory, one
//	               directory per command, the cap and its evictions
//	capture.go     Capture: one command's stdout, stderr and events writers,
//	               and the Output summary its Close returns
//	headtail.go    the inline head and tail of a stream
//	markers.go     the step-marker syntax
//
// The package knows nothing of processes or of JSON-RPC: package process
// pumps a child's pipes into a Capture's writers, and callers turn Output and
// Marker into the wire's types.
package capture
