// Package hub lets one toolhost session drive toolhosts elsewhere: each
// destination is a command line (--destination NAME=ARGV) that reaches
// another toolhost's stdio — `ssh -T host toolhost --root /srv/ws`,
// `kubectl exec -i pod -- toolhost --root /ws`, `docker exec -i c toolhost
// --root /ws`, or a local `toolhost --root …`. The hub talks to each with
// the public client of package client, so the far side keeps its own roots,
// sandbox and no-orphans promises; SSH, Kubernetes or Docker do the
// distribution.
//
// What the hub does:
//
//	spec.go      parsing NAME=ARGV, split as a shell would split it, with no shell run
//	hub.go       the destinations of a session, their states, connecting and closing
//	forward.go   calls forwarded to a destination, and its notifications back
//	rewrite.go   ids and artifact paths prefixed with "NAME/" on the way back, stripped on the way there
//
// Every notification of a destination reaches the session with its ids
// rewritten, in the order the destination sent it; those about a handle
// wait until the answer that names the handle has been queued. A
// destination whose transport dies ends each of its handles in exactly one
// toolResult with status "lost" (see conn.lose), fails the calls in flight
// with DestinationUnavailable, and connects again on the next request.
//
// The hub imports client and rpc, and is imported by tools.
package hub
