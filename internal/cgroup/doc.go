// Package cgroup holds the mechanics of cgroup directories that toolhost's
// process tracking (package process: one cgroup v2 per command, under a
// session directory) and its limits (package sandbox: v1 or v2 groups with
// pids and memory limits) share:
//
//   - Procs reads a cgroup's cgroup.procs; Populated and Events read
//     whether anything is left in a v2 cgroup (cgroup.events).
//   - Kill ends every process in a cgroup: at once through cgroup.kill on
//     v2 (the subtree included), else by SIGKILL to each listed process,
//     again and again, until none is left (v1). SignalKill only writes
//     cgroup.kill, for a caller that waits in its own way. Empty says
//     whether a cgroup is empty; WaitEmpty waits, a bounded time, until it
//     is.
//   - Remove deletes an empty cgroup, trying again for a moment while its
//     last processes drain out.
//   - SweepStale kills and removes what a server that died without
//     cleaning up (a SIGKILLed one runs no code) left under a parent
//     directory: the directories named <prefix><pid>-<anything> whose pid
//     is gone.
//
// What a cgroup is for (which controllers, which limits, when one is made,
// reused or joined) stays with the callers. Everything here works on
// directory paths and needs no state of its own, so it is safe for
// concurrent use.
//
// The package is a leaf: it imports only the standard library and
// golang.org/x/sys (its tests also go-cmp), and any package of toolhost may
// import it. It is Linux
// only; other platforms get none of its files but this one, and callers
// keep their own stubs in their non-Linux files.
//
// Where things are:
//
//	cgroup_linux.go  Procs, Populated, Events, Empty, SignalKill, Kill,
//	                 WaitEmpty, Remove
//	stale_linux.go   OwnerPID and SweepStale: the directories of dead servers
package cgroup
