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
// Landlock (ABI 1 to 9; with no_new_privs) is the base, and covers:
//   - reads and executes everywhere, in every mode (but the denied paths,
//     below);
//   - every write beneath the writable directories only: writing, creating
//     files, directories, symlinks, fifos and sockets, removing, renaming
//     and linking across directories (refer, ABI 2), truncating (ABI 3).
//     workspace-write's writable directories are the root, the command's
//     TMPDIR, the cache directory (the root's, which the caller keeps
//     across sessions), the extra --writable ones and the sources of
//     writable binds (below); read-only's is the TMPDIR alone. Device
//     nodes may not be made anywhere;
//   - ioctl on devices (ABI 5) only on /dev/null, /dev/zero, /dev/full,
//     /dev/tty, /dev/ptmx and /dev/pts, which stay usable, so a PTY works;
//   - with the network off, TCP bind and connect (ABI 4), unless a network
//     namespace with a loopback of its own is the boundary (below);
//   - with the network off or allow-listed, connect and sendmsg to
//     pathname unix sockets outside the writable directories
//     (LANDLOCK_ACCESS_FS_RESOLVE_UNIX, ABI 9: a Docker socket, an
//     ssh-agent; a server of the same sandbox stays reachable);
//   - always, signals to and abstract unix sockets of processes outside the
//     sandbox (ABI 6): a command cannot signal the server, nor other
//     commands, nor connect to their abstract sockets;
//   - always, ptrace of processes outside, and so /proc/<pid>/fd, mem and
//     root of the server;
//   - mount, umount and pivot_root, so no layer below can be undone.
//
// On an older kernel the rights of its ABI are used and the Report lists
// the rest; on a newer one the rights of ABI 9 are, and EnforcedBy says
// "landlock-abi-9" (ABI 8 added no right: a kernel of ABI 8 gets those of
// 7 and EnforcedBy says "landlock-abi-8").
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
// In workspace-write and read-only modes the command's temporary
// directory (Policy.TempDir, its TMPDIR) is then bound on /tmp, with what
// lies beneath it (tmp.go): the command writes its own /tmp, and neither
// the host's /tmp nor any other command's files there are in its sight.
// The policy's directories that lie in the host's /tmp (a root there, a
// read root, the artifacts directory, a bind's target) are cloned with
// every mount beneath them before, and mounted again at their own paths
// in the new /tmp, on directories (or, for a file's bind, an empty file)
// made there (following no symlink, never leaving it), so they keep their
// paths and their read-only or read-write binds. A TMPDIR in the
// environment that names the temporary directory is set to /tmp, since
// that path is out of sight. Without a mount namespace, or when a
// directory of the policy is /tmp or holds it (a root of /, a bind's
// source of /, which would show the host's /tmp), /tmp stays the host's,
// readable and read-only but for TMPDIR, and NotEnforced says so; Require
// does not refuse for it, since nothing is written there. Full mode keeps
// the host's /tmp, which it may write anyway.
//
// Protected paths (Policy.Protect: .git/hooks, .git/config) are bound
// read-only on themselves, with what lies beneath, where the command could
// write them (inside a writable directory, or anywhere in full mode); git
// still commits, since it writes neither. Each directory between the
// writable directory and a protected path (.git) is bound on itself too:
// a mount point cannot be renamed or removed, so the command cannot move
// .git aside and put a writable one with hooks of its own in its place.
// Read roots inside writable directories get the same. A protected path
// outside the writable directories is read-only already (Landlock and the
// read-only remount). Denied paths (Policy.DenyRead: ~/.ssh, ~/.netrc) are
// masked in every mode: a directory by an empty read-only directory, a
// file (or anything else) by an empty read-only file, each with the mode
// and owner of what it hides, so that stat shows an empty directory or
// file where the secret was; both are entries of a small tmpfs of the
// command's own (nosuid, nodev, noexec), cloned with open_tree. Whenever a
// path is denied, every block device directly under /dev is masked the
// same way: root reads a disk raw, and a denied file's bytes with it. The
// Report lists the protected and denied paths that were there: a path that
// does not exist when the command starts is left alone and listed in
// neither (it cannot be masked later: there is nothing to mount over until
// it exists), and a symlink protects or hides its target. Each path is
// opened (O_PATH) when the policy is, and opened again in the new
// namespace without following any symlink (openat2 RESOLVE_NO_SYMLINKS)
// and checked to be the same file before it is mounted over through that
// descriptor, so that a symlink swapped in meanwhile cannot redirect a
// mount. A denied directory that holds directories the command uses (the
// root, a writable directory such as the cache, which lives in the
// caller's state directory, a read root) or a bind's target is masked
// all the same, after the other binds: each held directory is cloned
// first with open_tree, with every mount beneath it (its own binds and
// masks), the mask holds the path down to each (empty directories of the
// mode and owner of those they stand for, deepest masks first), and the
// clones are mounted there; a bind's target gets an empty directory or
// file there, which the bind is mounted on. So the command lists in the
// denied directory only the path down to what it uses, and reads and
// writes nothing else of it. A denied path that is itself a directory the
// command uses stays readable (missing: Require refuses). Without a mount
// namespace Landlock cannot take a subtree back: every protected path
// inside a writable directory and every denied path is missing
// confinement (Require refuses; the Report lists each one).
//
// Binds (Policy.Binds, a bucket's objects materialised by the caller, a
// path of the machine shown elsewhere) show a source, a directory or a
// file, at a target of the same kind the caller made, inside the root or
// anywhere else, in every mode. They are made after every mask and
// before the private /tmp: each source is cloned with open_tree with
// every mount beneath it (the masks of denied paths, the read-only binds
// of protected paths and read roots, a /proc of the PID namespace), so a
// bind never shows what is denied, nor another bind; then each clone is
// mounted on its target, opened again without following a symlink and
// checked to be the policy's (or, in a denied directory, the mount point
// its mask holds). A read-only bind is read-only with every mount in it:
// nothing beneath its target can be written, created, removed, renamed,
// chmodded or touched, even inside the root, and the target itself, a
// mount point, cannot be removed or renamed. A writable bind's top mount
// is read-write and Landlock grants writes beneath its source (in
// workspace-write; read-only mode binds every source read-only); the
// protected paths and read roots beneath its source are bound read-only
// in it, and the protected paths beneath its target, which it hides, are
// cloned before and mounted again on top of it at their paths, read-only,
// the directories between pinned in the bind, so that a bind never makes
// a protected path writable (the start fails where the source has nothing
// to keep one on). A policy error refuses a bind whose source lies in a
// denied path (but for a directory the command uses there), whose target
// is / or holds a directory the command uses or another bind's target, or
// a writable one whose source or target lies in a protected path or a
// read root. Without a mount namespace no bind can be made, and Start
// refuses the command, Require or not (ErrUnavailable, naming the binds);
// the Report lists each target made, with ":ro" or ":rw".
//
// A PID namespace of its own (needs CAP_SYS_ADMIN) hides every process
// outside the sandbox: a command cannot signal, renice (setpriority, which
// no Landlock scope covers), trace or read /proc/<pid> of them, for they
// have no pid in its namespace, and ps shows its own tree only. The
// forking thread unshares CLONE_NEWPID, so that what it forks afterwards
// is born in the namespace, and forks first an init, the namespace's pid
// 1, then the command, pid 2 (pidns_linux.go). The command is not pid 1,
// which matters: the kernel drops every signal without a handler sent to a
// pid 1, SIGTERM from the server included, and gives it the namespace's
// orphans. So the command stays the server's child, gets SIGTERM first on
// a cancel and may trap it, dies of it otherwise, leads its process group
// or its terminal's session (job control, Ctrl-C and Ctrl-Z as before),
// sits in its cgroups, and the server sees and signals all of it with its
// own pids, through its own /proc (the subreaper, step markers,
// TOOLHOST_EVENTS_FD and port detection do not change). The init is about
// 120 bytes of machine code (amd64 and arm64; no PID namespace elsewhere)
// run from a sealed memfd: it closes what it inherited, makes itself
// non-dumpable, ignores SIGCHLD, so that the kernel reaps the orphans
// re-parented to it as they exit, and waits. Finish kills it once the
// command has been waited for, and the kernel then kills everything left
// in the namespace (a daemon that left the command's groups, cleared its
// environment and escaped every cgroup included) before the init can be
// reaped; it dies by Pdeathsig with the forking thread too, so the tree of
// a SIGKILLed server ends as well. Go's fork would kill a child with a
// Pdeathsig in a new namespace (getppid is 0 there): Start clears the
// command's, which the init's covers. In the mount namespace a /proc of
// the PID namespace replaces /proc (fsconfig's pidns option, Linux 6.18:
// a procfs mounted the usual way shows the mounter's namespace, and the
// forking thread is not in the new one), read-only where the rest is; the
// thread mounts it before Landlock forbids it mounts. Without a mount
// namespace /proc/<pid> of processes outside stays readable and the Report
// says so; without a PID namespace processes outside are visible and can
// be reniced (signals and ptrace stay scoped by Landlock ABI 6) and the
// Report says so. Policy.IsolatePIDs makes either missing (Require
// refuses).
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
// (close-on-exec). The listener, and so every connection it accepts,
// asks for cubic (else reno) congestion control: those connections never
// leave the namespace's loopback, where a default of BBR would pace every
// byte a download brings in by a timer, at a third of the speed. The
// connections the proxy dials keep the machine's default. The Report
// says Proxy, with Network false, and EnforcedBy "netns+proxy". A user
// namespace made at the fork cannot host the listener (the forking thread
// is not in it), and with no namespace at all there is nothing to listen
// in: then Require refuses, naming the allow-list, and otherwise the
// command runs with the network off, never on, and NotEnforced says so.
// Landlock's TCP rights, where the domain needs them (above), get a rule
// for the proxy's port.
//
// EnterNetNS starts a thread of the server in another network namespace,
// opened as /proc/<pid>/ns/net, with setns (CAP_SYS_ADMIN, as unshare
// needed), locked and never given back like a confining thread, and dials
// there for the caller, one dial at a time: the inside end of a port
// forward. Close ends it; Drain waits for it too.
//
// A network namespace does not hide pathname unix sockets. With the
// network off (or allow-listed) and Landlock older than ABI 9, a second
// seccomp filter (unixsock_linux.go; EnforcedBy "seccomp-unix") refuses
// socket(AF_UNIX) (EACCES) and socketpair(AF_UNIX, SOCK_DGRAM), whose
// sockets sendto(2) any pathname; stream and seqpacket socketpairs, which
// have no address, still work. It is stacked on the other filter where
// there is one (the kernel runs both; the strictest answer wins, so their
// order does not matter) and installed on the forking thread only, without
// TSYNC, after everything that thread does with sockets. What an older
// kernel loses: no unix socket at all, inside the sandbox too (a server
// and its client in the root, a language server listening on a socket in
// TMPDIR, gpg-agent, nscd lookups, which fall back to files).
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
//   - Reading: every mode reads whatever the user can, but the denied paths
//     that exist when the command starts; a denied file stays readable by
//     its other names (hard links, bind mounts elsewhere), and a full-mode
//     command of a root server keeps CAP_MKNOD, so it can make a node of a
//     disk and read it raw. In a denied directory that holds directories
//     the command uses or bind targets, the names, modes and owners of
//     the directories on the path down to them stay visible.
//   - A bind's target shows its source as it is while the command runs:
//     what the caller changes there, the command sees. The directories
//     above a target in a writable directory are not pinned: the command
//     may move one aside, with the bind in it, as it may any directory it
//     writes; the source stays as writable as the bind was, wherever it
//     goes.
//   - A protected path that does not exist when the command starts (an
//     existing repository without .git/hooks can be given hooks, and a
//     repository the command makes has its own), and what git reads
//     besides the protected paths (a .git/commondir the command writes
//     points git at another directory's config and hooks). The caller
//     expands a rule such as "the hooks of every repository" into paths
//     at each start (package tools, with internal/gitrepos's bounded
//     scan) and names, after the command, what it wrote there.
//   - With the network on, pathname unix sockets outside the sandbox (a
//     Docker socket, an ssh-agent, D-Bus, X11).
//   - Descriptors the caller passes to the command stay usable whatever
//     they point to (Landlock checks a file when it is opened).
//   - Without a mount namespace: metadata outside the writable
//     directories, read roots and protected paths nested in a writable
//     directory, denied paths, /proc/<pid> of processes outside, and a
//     private /tmp (the host's is read-only and visible).
//   - What lies in the host's /tmp is out of a confined command's sight,
//     whatever needs it: an X11 socket in /tmp/.X11-unix, a program or a
//     file there outside the policy's directories. A root that lies in the
//     host's /tmp lies in the command's /tmp too, at its own path, so a
//     command that empties /tmp (rm -rf "$TMPDIR"/*, since TMPDIR is /tmp)
//     empties the root as well, as rm -rf /tmp/* always could.
//   - Without a PID namespace (an unprivileged server, or an architecture
//     other than amd64 and arm64): setpriority of processes outside and
//     their /proc/<pid>.
//   - On kernels older than ABI 6, signals and (without a network
//     namespace) abstract unix sockets outside; older than ABI 3,
//     truncation outside; older than ABI 5, device ioctls.
//   - RLIMIT_CPU is per process: each descendant has its own budget, and
//     only the command's own process is seen exceeding it.
//   - Full mode adds no filesystem confinement and drops no capability: a
//     root command there can leave its limit cgroups.
//   - Without a PID namespace, a SIGKILLed server runs no code: what is
//     left in its limit groups (grandchildren; the command's own process
//     dies by Pdeathsig) runs on until another server makes its first
//     group under the same parent and sweeps them (cgroup_linux.go, with
//     internal/cgroup's SweepStale). With one, the init's Pdeathsig ends
//     the whole namespace.
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
// XDG_CACHE_HOME, GOCACHE and the like there); seeing or signalling
// processes it did not start (pkill, a debugger attaching to the editor);
// and, with the network off on a kernel older than Landlock ABI 9, any
// unix socket.
//
// # Cost
//
// Every layer is paid per command, since each is applied to a thread made
// for it. Against a plain true, scoping alone costs least, Landlock's
// filesystem rules more, and the mount namespace with the capability drop
// more again (workspace-write as root). A network namespace costs more
// than those three together, and so does each v1 pids or memory group
// (moving a thread between v1 cgroups waits for an RCU grace period, and
// a memory group is slow to make and remove); the stop at exec for a cpu
// limit costs less.
//
// The proxy namespace costs a little more than the network off (the
// listener made, a netproxy served on it and closed after); its target is
// at most 1.5 times the network off.
//
// The PID namespace costs its init's fork and exec, the /proc mount, and
// killing and reaping the namespace at Finish; the unix filter costs
// little; the agents' protect and denyRead defaults cost a mount for each
// protected path, pin and existing denied path; a private /tmp costs a
// mount for it and one for each carried directory. A bind costs a mount,
// and one more for each path kept read-only in a writable bind and each
// directory pinned there; a denied directory that holds what the command
// uses costs a mount more for each directory it shows again. A
// re-executed server as init would cost far more: toolhost's own start
// (its packages' init among it) and the memory it holds idle, against
// those of the small machine-code program used here (pidns_init_*.go).
//
// BenchmarkStart, BenchmarkLayers, BenchmarkStartProxy,
// BenchmarkIsolation and BenchmarkPrivateTmp measure these, each
// interleaving runs with the layer and without it so that both see the
// same load; BENCHMARKS.md has, as last measured, the floor of the
// default confinement (BenchmarkLayers) and the allow-list's cost.
package sandbox
