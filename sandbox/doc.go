// Package sandbox confines one child process by the kernel: where it may
// write, whether it reaches the network, whom it may signal, and how much
// memory, how many tasks and how much CPU time it may use. It never
// confines the server that starts it.
//
// # How a single child is confined
//
// Go's os/exec runs no code of ours between fork and exec, but Landlock
// domains, no_new_privs, seccomp filters, namespaces set with unshare, the
// capability bounding set and v1 cgroup membership all belong to a thread,
// and a child inherits them from the thread that forks it. Start therefore
// runs on a goroutine locked to its own OS thread, never unlocked: the
// thread applies every layer to itself, calls cmd.Start, and is held until
// Finish (Pdeathsig fires when the forking thread exits); then the
// goroutine returns and the runtime ends the thread. The runtime never
// clones new threads from a locked one, and the main thread, which the
// runtime cannot end, is never used. So a running confined command costs
// one OS thread, and nothing else in the process is ever confined (the
// tests check every thread of the test process after confined runs).
// Landlock is applied with raw system calls on that thread only:
// go-landlock's Restrict helpers would confine every thread of the server.
//
// # The layers, and what each covers
//
// Probe measures what the kernel offers; Plan says what a Policy will get;
// the Report of each Start says what was applied, in EnforcedBy, and what
// was not, in NotEnforced. Nothing is claimed that was not enforced, and
// with Spec.Require a command is refused (ErrUnavailable, with what is
// missing) rather than run with less than asked.
//
// Landlock (ABI 1 to 7; with no_new_privs) is the base, and covers:
//   - reads and executes everywhere, in every mode;
//   - every write beneath the writable directories only: writing, creating
//     files, directories, symlinks, fifos and sockets, removing, renaming
//     and linking across directories (refer, ABI 2), truncating (ABI 3).
//     workspace-write's writable directories are the root, the command's
//     TMPDIR, the session cache and the extra --writable ones; read-only's
//     is the TMPDIR alone. Device nodes may not be made anywhere;
//   - ioctl on devices (ABI 5) only on /dev/null, /dev/zero, /dev/full,
//     /dev/tty, /dev/ptmx and /dev/pts, which stay usable, so a PTY works;
//   - with the network off, TCP bind and connect (ABI 4), unless a network
//     namespace with a loopback of its own is the boundary (below);
//   - always, signals to and abstract unix sockets of processes outside the
//     sandbox (ABI 6): a command cannot signal the server, nor other
//     commands, nor connect to their abstract sockets;
//   - always, ptrace of processes outside, and so /proc/<pid>/fd, mem and
//     root of the server;
//   - mount, umount and pivot_root, so no layer below can be undone.
//
// On an older kernel the rights of its ABI are used and the Report lists
// the rest; on a newer one the rights of ABI 7 are, and EnforcedBy says
// "landlock-abi-7".
//
// A mount namespace (needs CAP_SYS_ADMIN, so a server running as root)
// covers what Landlock does not. Every mount is remounted read-only and
// each writable directory is bind-mounted read-write on itself (its top
// mount only: mounts beneath it stay read-only), so chmod, chown,
// utimensat (a touch of an existing file) and setxattr fail outside the
// writable directories; Landlock grants no right over metadata. A read
// root inside a writable directory is bind-mounted read-only on top, since
// Landlock only grants and cannot take a subtree back. In full mode the
// read roots alone are bound read-only, and Landlock, granting everything,
// keeps the binds in place. Without a mount namespace (an unprivileged
// server) metadata outside the writable directories is not covered and
// the Report says so; a read root inside a writable directory is then
// missing confinement (Require refuses it).
//
// With the network off, a network namespace of its own cuts the command
// off UDP, raw sockets and everything else outside its own loopback, and
// hides the server's abstract unix sockets: made by the forking thread
// with unshare when the server may (its loopback is brought up), else by
// cloning the child into a new user namespace, which maps only the
// server's uid and gid and gets its maps while the child is stopped at its
// exec (the forking thread, confined, may not write under /proc; loopback
// stays down). Where neither can be made, a seccomp filter denies socket()
// for AF_INET, AF_INET6 and AF_PACKET (EACCES) and io_uring_setup
// (ENOSYS), and kills a system call of another architecture.
//
// A namespace made by unshare, its loopback up, is the boundary: Landlock
// leaves TCP alone there, so the command's own servers listen and its own
// clients reach them (a dev server, a test database), and nothing outside
// is reached, since the namespace has no other interface. Package process
// forwards a port of the server's loopback to such a server (EnterNetNS,
// below). Where nothing else would put the command in a Landlock domain
// (full mode on ABI 4 or 5), Landlock still handles TCP: the domain is
// what keeps a root command from opening the namespaces of processes
// outside (/proc/<pid>/ns/net needs ptrace access). The user namespace's
// and the seccomp filter's ways keep Landlock's TCP rights too.
//
// # A network by name: the proxy namespace
//
// Policy.Proxy (with the network off) is for a command whose network is
// an allow-list of hosts: its only way out is a proxy the caller serves
// (package netproxy), in the server's own process, with no helper process.
// The forking thread unshares its network namespace and brings its
// loopback up as above, then, before Landlock and seccomp, makes a TCP
// listener on 127.0.0.1, port chosen by the kernel: a socket belongs to
// the namespace of the thread that creates it, and the confining goroutine
// is locked to that thread. Spec.ProxyEnv names the listener's address in
// the variables appended to the command's environment (netproxy.Env:
// HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and their lower case, with NO_PROXY
// empty), before the fork. ProxyListener hands the listener to the
// caller, which serves it from any thread; connections it accepts come
// from inside the namespace, and what the proxy dials for them leaves from
// the server's namespace. Finish closes it. The child never inherits it
// (close-on-exec). The Report says Proxy, with Network false, and
// EnforcedBy "netns+proxy". A user namespace made at the fork cannot host
// the listener (the forking thread is not in it), and with no namespace
// at all there is nothing to listen in: then Require refuses, naming the
// allow-list, and otherwise the command runs with the network off, never
// on, and NotEnforced says so. Landlock's TCP rights, where the domain
// needs them (above), get a rule for the proxy's port.
//
// EnterNetNS starts a thread of the server in another network namespace,
// opened as /proc/<pid>/ns/net, with setns (CAP_SYS_ADMIN, as unshare
// needed), locked and never given back like a confining thread, and dials
// there for the caller, one dial at a time: the inside end of a port
// forward. Close ends it; Drain waits for it too.
//
// A server running as root also drops from the child's bounding set the
// capabilities that would step around the rest or harm the machine:
// CAP_SYS_MODULE, CAP_SYS_BOOT, CAP_SYS_RAWIO, CAP_DAC_READ_SEARCH
// (open_by_handle_at), CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_MKNOD,
// CAP_NET_ADMIN, CAP_SYS_TIME, CAP_MAC_ADMIN, CAP_MAC_OVERRIDE, CAP_BPF,
// CAP_PERFMON, CAP_SYSLOG, CAP_AUDIT_CONTROL, CAP_LINUX_IMMUTABLE and
// CAP_SYS_RESOURCE (so it cannot raise its hard RLIMIT_CPU).
//
// # Limits
//
// Memory and pids come from cgroups: a delegated v2 controller where the
// server's cgroup gives it to its children (the command is forked straight
// into its group with CLONE_INTO_CGROUP, or the caller's own v2 group for
// the command gets the limits), else the v1 memory and pids hierarchies.
// In v1 the forking thread joins the command's groups before it forks and
// leaves them after, so the child starts inside them; the pids group has
// the exact limit while the thread sits in it, so the thread and the tree
// together never exceed it (a limit of 1 puts the child in the group while
// it is stopped at its exec instead). A v2 memory group kills the whole
// group on OOM (memory.oom.group). CPU time is RLIMIT_CPU, rounded up to
// seconds (SIGXCPU, then SIGKILL a second later), set while the child is
// stopped at its exec by PTRACE_TRACEME, before its program runs; where
// ptrace is forbidden it is set right after exec, and processes forked
// before it escape it (the Report says so).
//
// The first limit hit while the command runs (an OOM kill, or a refused
// fork) kills every process in the limit groups and calls Spec.OnLimit.
// The kernel notifies OOM (v1 eventfd, v2 memory.events) and v2 refused
// forks at once; v1 pids.events has no notification, so it is looked at
// every 50 ms, while the limit itself holds at once. Finish reports which
// limit was exceeded: memory (an OOM kill), pids (a refused fork), or cpu
// (the command's process died of SIGXCPU, or of SIGKILL after using its CPU
// time), then kills what is left in the groups and removes them.
//
// cgroup_linux.go makes the groups (toolhost-sandbox-<pid>-<n>), writes
// their limits, moves the forking thread in and out of v1 groups and
// watches their events files. Killing what is in a group, removing it, and
// the sweep of the groups that dead servers left (their pid gone; done once
// per parent directory, before this process's first group there) are
// package internal/cgroup's, shared with package process.
//
// # What is not covered
//
//   - Reading: every mode reads whatever the user can, secrets included.
//   - Connecting to pathname unix sockets outside the sandbox (a Docker
//     socket, an ssh-agent, D-Bus, X11): Landlock ABI 7 has no right for
//     it, and a network namespace does not hide filesystem sockets.
//   - Descriptors the caller passes to the command stay usable whatever
//     they point to (Landlock checks a file when it is opened).
//   - Without a mount namespace: metadata outside the writable
//     directories, and read roots nested in a writable directory.
//   - On kernels older than ABI 6, signals and (without a network
//     namespace) abstract unix sockets outside; older than ABI 3,
//     truncation outside; older than ABI 5, device ioctls.
//   - RLIMIT_CPU is per process: each descendant has its own budget, and
//     only the command's own process is seen exceeding it.
//   - Full mode adds no filesystem confinement and drops no capability: a
//     root command there can leave its limit cgroups.
//   - A SIGKILLed server runs no code: what is left in its limit groups
//     (grandchildren; the command's own process dies by Pdeathsig) runs
//     on until another server makes its first group under the same parent
//     and sweeps them (cgroup_linux.go, with internal/cgroup's
//     SweepStale).
//   - With the network on, nothing about the network is confined but
//     abstract unix sockets.
//   - Under the proxy, only TCP through the proxy leaves the namespace:
//     no UDP, and no DNS for the command (names are resolved by the proxy,
//     so a tool that resolves names itself gets no answer). A tool that
//     ignores the proxy variables has no route out at all. The proxy sees
//     host names and addresses, not what a TLS tunnel carries (package
//     netproxy says more).
//   - Legacy TIOCSTI on an inherited terminal follows the kernel's setting.
//
// What tools sometimes want and a confined command cannot have: writing
// /dev/shm (POSIX shared memory), /run/user, /proc/self files such as
// oom_score_adj, or caches outside the cache directory (the caller points
// XDG_CACHE_HOME, GOCACHE and the like there).
//
// # Cost
//
// On these machines (2 shared cores; BenchmarkStart, medians of runs
// interleaved with unconfined ones, about 0.85 ms for a plain true) a
// confined true costs about 0.08 ms more with scoping alone, 0.15 ms with
// Landlock's filesystem rules, and 0.26 ms with the mount namespace and the
// capability drop as well (workspace-write as root). A network namespace
// adds about 0.6 ms, a v1 pids or memory group 0.4 to 0.6 ms each (moving
// a thread between v1 cgroups waits for an RCU grace period, and a memory
// group is slow to make and remove), and the stop at exec for a cpu limit
// 0.1 to 0.25 ms.
//
// The proxy namespace costs about 0.15 ms more than the network off
// (BenchmarkStartProxy: a workspace-write true, the listener made, a
// netproxy served on it and closed after, interleaved with the network off
// in the same run; medians 1.73 to 1.98 ms against 1.59 to 1.81 ms, a
// ratio of 1.04 to 1.11 over six runs of 300 and 1,000; issue 25's target
// is 1.5).
package sandbox
