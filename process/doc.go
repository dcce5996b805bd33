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
//	start.go            Reserve, Launch, Abort: a command that exists before its start
//	supervisor.go       the supervisor goroutine of every command: steps, stops, the end
//	tracker.go          step markers of a plain command turned into steps, heartbeats
//	spawn*.go           forking one process with its pipes (or terminal), pumps and waiter
//	pty*.go             pseudo-terminals: opening one, its size, its foreground group
//	input.go            a command's input: writes in turn order, eof, resize, signals
//	jsonl.go            a stdout of JSON lines split into events (Spec.StdoutJSONL)
//	ports*.go           the TCP ports a command's tree listens on (Spec.WatchPorts)
//	sockdiag_linux.go   a namespace's listening sockets, from the kernel's socket diagnostics
//	forward*.go         port forwards into a command's network namespace
//	network.go          a network allow-list: each step's proxy, and its counts
//	kill.go             the TERM, grace, KILL ladder
//	reaper*.go          the child subreaper, orphan reaping, the session's and
//	                    the commands' cgroups (reaper_cgroup_linux.go)
//	registry.go         handles, running and recently finished
//	env.go              the environment allowlist
//
// A network by name. A Confinement with Network (an allow-list of package
// netproxy) runs every step with the sandbox's proxy option, whatever the
// policies say: the step gets a network namespace of its own, the sandbox
// makes a listener on its loopback from the forking thread and puts the
// proxy variables naming it into the step's environment before the fork,
// and the Manager serves a netproxy.Proxy of the step's own on it, from
// the step's spawn until its process has exited, when the proxy is closed
// (Close waits for its goroutines; the step's pumps group owns Serve).
// Every refusal is logged with the handle id (the command id before a
// handle has one) and the command id; Result.Network sums what the steps'
// proxies let through and refused (Current gives it so far). A process the
// step leaves running outlives its proxy: the next step has its own.
// Where no namespace can host the proxy, the sandbox runs the step with
// the network off, or refuses under Require.
//
// Dev servers stay reachable. A command with a network namespace of its
// own (the network off or allow-listed) that listens on its loopback
// cannot be reached from this machine directly. The port watcher
// (Spec.WatchPorts) asks the kernel for each namespace's listening sockets
// (NETLINK_SOCK_DIAG, through a socket made in the namespace by a thread
// that entered it; its TCP tables through a process of the tree in it
// where that fails), and forwards each socket it finds outside the server's
// namespace: it listens on 127.0.0.1 of the server's namespace, port
// chosen by the kernel, and joins each connection accepted there to one
// made inside by a thread of the server that entered the namespace
// (sandbox.EnterNetNS; one per namespace with forwards open). portOpened
// (OnPort) names the host side in Port and Address, and the socket's own
// in InsidePort and InsideAddress; its close comes once the forward's
// listener and connections are closed, when the socket stops listening or
// the command ends. A socket that cannot be forwarded (the server cannot
// enter the namespace) is not reported, and is logged. A forward is
// reachable by anyone on this machine who can reach the server's
// loopback, as a server the command ran with the network on would be.
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
// removing it cost more than forking into one used before. One command
// has it at a time. Without cgroups such a descendant is out of reach
// until Shutdown, which kills every orphan re-parented to the server.
//
// A confined command where the server may make one (as root) also runs in
// a PID namespace of its own, under package sandbox's init: its orphans
// are re-parented to that init, which reaps them, not to the server; the
// server still sees every pid and kills the tree as above, and when the
// command's own process ends, the sandbox's Finish kills what is left in
// the namespace at once (SIGKILL, no grace).
//
// A command can exist before it runs: Reserve gives it its ids and a place
// among the running commands (and Promote a handle) while its caller still
// prepares the start, which Launch then makes. Until Launch takes it, it
// has no process to leave behind: a Cancel (or Shutdown) ends it at once,
// and Launch then forks nothing (ErrStopped). Once Launch has taken it, a
// stop is the supervisor's, as for any started command, and the guarantees
// above hold from its first fork; a start that fails leaves nothing but
// what a failed Start would (begin's cleanup), and ends the command
// "failed".
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
