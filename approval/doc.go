// Package approval decides whether a confined command may do what its
// confinement refused, by asking the user of the session's client, and
// remembers the answers where no confined command can forge them.
//
// # What it decides
//
// Two kinds of refusal can be asked about: Network, a host:port a
// command's allow-list does not name (the proxy holds the connection
// meanwhile), and Sandbox, a sandbox wider than the server allows (asked
// before the command starts). A Broker, one per session, decides each
// Request with Decide: a remembered Grant that covers it answers at once;
// otherwise the session's Asker puts it to the user. Asks for the same
// Kind and Target that are waiting at once are merged into one question,
// whatever their handles, so that twenty commands needing five hosts cost
// five questions; a deny, or an allow for the session or always, answers
// every caller waiting on it, while an allow for once or for the command
// answers only the handle it was asked for, and the others ask again.
//
// It fails closed. No Asker, --approvals deny (Config.Deny), more asks
// pending than Config.MaxPending, an Asker's error, an answer that allows
// without a scope or with one not offered, a timeout, a caller whose
// context ends, and a Broker that is closed all deny, each with the
// DecidedBy and the Reason that say why. Decide never waits longer than
// its context or Config.Timeout, whatever the Asker does. A question that
// nobody waits on any more is withdrawn (the Asker's context ends), and
// an answer that comes after the timeout counts for nothing.
//
// The Broker owns the goroutines that put its questions, one per
// pending ask; Close withdraws them all and waits for them.
//
// # What it remembers, where
//
// A grant is exactly what was asked: the Kind and the Target, compared
// byte for byte, never a wildcard nor a wider target. Once is never
// remembered. Command grants live in the Broker until EndCommand for
// their handle; Session grants live in the Broker as long as it does (a
// persisted session keeps its Broker across resumes). Always grants live
// in a Store: one JSON file under the user's config directory
// (DefaultStorePath), versioned, keyed by the canonical root, 0600 in a
// 0700 directory, written whole (a temporary file, fsync, rename, fsync of
// the directory) under a lock file beside it, and re-read whenever
// another process changed it. A damaged file, or one of another version,
// is refused with an error that says so, and is never half-read nor
// overwritten.
//
// # What it never does
//
// It never speaks JSON-RPC, never touches the proxy nor the sandbox, and
// never chooses where the Store lives relative to a root: its caller
// keeps the grants file out of every place a confined command can write.
// It imports nothing of toolhost but internal/fsutil.
package approval
