// Package persist keeps sessions alive past their connection (--persist):
// an editor reload, a crashed agent or a dropped ssh link detaches a
// session instead of killing its commands, and a later toolhost resumes
// it by id, with every toolResult delivered exactly once.
//
// # Who holds the commands
//
// A holder: one daemon per OS user, workspace root and toolhost build,
// started by the first `toolhost --persist` for that root and left
// running in a session of its own (setsid), so that neither the client's
// end nor a signal to its process group reaches the commands. Every
// `toolhost --persist` is then a thin front (Serve): it reads the
// client's first message (to learn the root when --root does not give
// it), connects to the holder's unix socket, starting the holder if none
// answers, and hands it its stdin, stdout and stderr (SCM_RIGHTS) with
// the bytes it has read, its command line, environment and directory. The
// holder (RunHolder) serves the connection on those descriptors itself,
// so a request costs what it costs without --persist: no byte is relayed.
// The front waits until the holder says the connection ended, and exits
// with the code the holder gives. The cost: one more process per root
// while sessions live, and the holder's exec at the start of the first
// session.
//
// # Who may attach
//
// The socket lies in a directory only its owner may enter: 0700 under
// $XDG_RUNTIME_DIR/toolhost, or under the state directory's run/ when that
// is unset. A directory with another owner or a wider mode is refused,
// never used. The holder checks each connection's peer credentials
// (SO_PEERCRED) and serves only its own user; the session id alone is
// never enough. One lock file per holder (flock, internal/fsutil) makes it
// the only holder of its root: a socket left by a holder that died is
// found stale (its lock is free) and replaced.
//
// # The journal
//
// Each persisted session has a journal in the state directory
// (--state-dir, default $XDG_STATE_HOME/toolhost, else
// ~/.local/state/toolhost): sessions/<id>.journal, one JSON record a
// line, appended with a single write each (what a killed holder wrote is
// in the page cache, so nothing short of a machine crash loses it; a torn
// last line is ignored). Its first record has the format's version ("v":
// 1; a journal of another version is left alone), the session's root, its
// initialize params, the holder's pid and start time, and what the
// session's commands could leave behind (their marker and cgroup
// directory). Then: each handle as it starts, each toolResult with its
// seq as it is made, and each seq once written to a connection. A session
// that ends is rewritten, whole (temporary file, fsync, rename, with
// internal/fsutil), as one tombstone line saying why, so that a resume of
// it is told "ended" or "expired"; tombstones go after a week.
//
// The kinds of record are interpreted in one place: a journal is read by
// replaying its records, in order, into what it says of its session
// (replay). A holder that takes a session over reads it so, and so does a
// compaction. A journal holding a quarter more written toolResults than a
// session's ledger keeps (rpc.LedgerKeepWritten) is compacted in the
// background: its replay is cut to what a later holder needs (the session
// and holder records, the handles still running, every toolResult not yet
// written, the last written ones the ledger keeps, and the
// highest-numbered handle) and written again to a temporary file, which is
// synced and renamed over the journal. Records appended meanwhile are
// copied over under the journal's lock just before the rename, so none is
// lost; an end meanwhile wins, and the compaction gives up. A session
// that lives for weeks keeps a journal about the size of its ledger.
//
// A holder that starts finds the journals of its root whose holder is
// dead: it kills what is left of their commands (the cgroup whole, and
// every process carrying their marker), ends each handle that has no
// toolResult in one with status "lost", appends it to the journal, and
// keeps the session, detached, for its linger: a resume gets every
// toolResult the dead holder made and could not deliver, the lost ones,
// and new commands.
//
// # MCP
//
// An MCP client never resumes a session by id: a front whose client
// speaks MCP says so in its hello (ModeMCP), and the holder serves it on
// the shared MCP server of its command line (SharedMCP, which main makes
// with package mcp), made at the first such front. Every MCP connection
// of that command line reaches the same toolhost session, commands and
// tasks. The server's toolhost session is a session of the holder like
// any other (journaled, so that a killed holder leaves no process), made
// on pipes inside the holder (InnerServer); no resume reaches it, and
// sessions {} leaves it out.
//
// # Lifetime
//
// Sessions and shared MCP servers linger alike (lingering): each counts
// the connections attached to it (a session one at a time, a resume
// taking it from the connection before; an MCP server any number), and
// once none is, it lingers for --linger (default 10m), then ends unless
// one attaches first. A session that ends so has its commands killed
// ("expired"); an MCP server is closed, which ends its commands.
// shutdown ends a session at once ("ended"); a signal to the holder ends
// every MCP server, then every session. A holder without sessions,
// servers or connections exits after a short idle time.
//
// # Where things are
//
// front.go is the front; holder.go the holder process (its socket, lock,
// idle time and end); conn.go the holder's side of one connection a front
// handed it; session.go a persisted session (made, resumed, ended,
// listed); linger.go what sessions and MCP servers share of their
// lifetime; mcp.go the shared MCP servers; journal.go, replay.go and
// compact.go the journal (its records and appends, its reading, its
// compaction); adopt.go the sessions a dead holder left; wire.go and
// sys_linux.go what a front and its holder say over the socket; dirs.go
// and cache.go the directories.
package persist
