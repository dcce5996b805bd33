// Package process runs commands for toolhost: it spawns argv (never through a
// shell) in a process group of its own (or, under a pseudo-terminal, a
// session of its own) with a filtered environment, pumps
// the child's stdout, stderr and events pipe into a capture.Capture, turns
// step markers and recipe steps into observer callbacks, enforces timeouts
// and cancellation with a TERM, grace, KILL ladder, and keeps a registry of
// handles for detached commands.
//
// Where things are:
//
//	manager.go          Manager, Config, Spec, Result: starting commands, Shutdown
//	manager_command.go  Command: one command's state, Snapshot, Cancel, attribution
//	supervisor.go       the supervisor goroutine of every command: steps, stops, the end
//	tracker.go          step markers of a plain command turned into steps, heartbeats
//	spawn*.go           forking one process with its pipes (or terminal), pumps and waiter
//	pty*.go             pseudo-terminals: opening one, its size, its foreground group
//	input.go            a command's input: writes in turn order, eof, resize, signals
//	jsonl.go            a stdout of JSON lines split into events (Spec.StdoutJSONL)
//	ports*.go           the TCP ports a command's tree listens on (Spec.WatchPorts)
//	kill.go             the TERM, grace, KILL ladder
//	reaper*.go          the child subreaper, orphan reaping, the session's and
//	                    the commands' cgroups (reaper_cgroup_linux.go)
//	registry.go         handles, running and recently finished
//	env.go              the environment allowlist
//
// Output capture (the artifact files, the inline head and tail, step-marker
// parsing) is package capture's: this package only owns the pipes that feed
// it.
//
// No orphans. On Linux a Manager makes the server a child subreaper
// (PR_SET_CHILD_SUBREAPER), so descendants that leave their process group
// (setsid, double fork, nohup, daemons) are re-parented to the server rather
// than to init. Every child carries TOOLHOST_COMMAND=<session>/<commandID> in
// its environment; when a command ends, however it ends, the Manager kills its
// process groups and every descendant that carries its marker or sits in one
// of its groups, and reaps the zombies that re-parenting hands to the server.
// Where a writable cgroup2 hierarchy exists (probed under the server's own
// cgroup; Config.DisableCgroups turns it off), each command also gets a
// cgroup of its own that its processes are forked straight into: then even
// a descendant that cleared its environment and left the group is found,
// and SIGKILL reaches the whole cgroup at once through cgroup.kill. A
// command's cgroup goes to a later command once it is empty (and was never
// killed whole): making a cgroup, forking into it for the first time and
// removing it cost about 230 µs more than forking into one used before.
// One command has it at a time. Without
// cgroups such a descendant is out of reach until Shutdown, which kills
// every orphan re-parented to the server.
//
// A SIGKILLed server runs no code: each command's direct child dies by
// Pdeathsig (SIGKILL), but grandchildren live on. Where cgroups are in use,
// the next Manager created in the same cgroup kills the dead session's
// cgroup whole (cgroup.kill) before removing it; without cgroups those
// grandchildren are out of reach.
//
// reaper_cgroup_linux.go decides which cgroups there are: the session's
// directory (toolhost-<pid>-<nonce>, under the server's own cgroup on the
// cgroup2 mount), one cgroup per running command, and the empty ones kept
// for reuse. Reading, killing and removing them, and the sweep of dead
// sessions, are package internal/cgroup's, shared with package sandbox.
//
// The reaper only waits for pids that are the server's children, not started
// through os/exec by this package, and not in the server's own process group,
// so it never steals a wait from os/exec.
//
// The package knows nothing of JSON-RPC: callers convert Result, Snapshot and
// the Observer events to the wire.
package process
