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
//	resume.go    a dropped transport replaced by one that resumes the far session
//	rewrite.go   ids and artifact paths prefixed with "NAME/" on the way back, stripped on the way there
//
// Every notification of a destination reaches the session with its ids
// rewritten, in the order the destination sent it; those about a handle
// wait until the answer that names the handle has been queued. A
// destination whose transport dies ends each of its handles in exactly one
// toolResult with status "lost" (see conn.lose), fails the calls in flight
// with DestinationUnavailable, and connects again on the next request.
//
// # Far sessions, transports and epochs
//
// A conn is one far session, and an epoch counts far sessions, not
// transports: its ids are prefixed "NAME/" for the first, "NAME#2/" for
// the second, and so on, so that a new far session counting from h-1 again
// never meets an id of a lost one. When the far toolhost runs with
// --persist (its initialize answers capabilities.resume and a sessionId)
// and --destination-retry is above 0, a transport that drops does not end
// the conn: the destination shows "reconnecting", the hub starts its
// command again (the first attempt after 100 ms, each next after twice as
// long, at most 5 s, up to --destination-retry attempts) and initializes
// it with resume {sessionId, lastSeq}, lastSeq the highest far seq of a
// toolResult received. The resumed far session is the same conn, with the
// same epoch, prefix and handles: ids the client holds stay valid, and
// only the conn's client changes. The far side sends again every
// toolResult after lastSeq, those made while no transport was there among
// them; the hub numbers what it forwards with its own session's seq
// (Sink.NotifyNumbered). The conn is given up, and each of its handles
// ends "lost", only when every attempt fails or the far side answers
// SessionNotFound (the session is past its linger, or was shut down).
//
// While a conn reconnects, requests on its handles wait for the new
// transport (reconnectWait at most; writeInput is queued, in order,
// without blocking the read loop) and answer DestinationUnavailable if
// the conn is given up. A request that was in flight when the transport
// dropped is sent again on the resumed one if doing it twice is doing it
// once (wait, readOutput, progress, readFile, cancel, resize); any other
// answers DestinationUnavailable, since it may have reached the far side.
// A runCommand or longRunning among those may have started a far handle
// that no answer named: the reconnection lists the far session's handles
// (progress), cancels each that runs and is not known to the hub, and
// drops whatever it sends. The hub keeps the far id of every handle an
// answer named for the conn's life, to tell them (some tens of bytes a
// handle).
//
// The hub imports client and rpc, and is imported by tools.
package hub
