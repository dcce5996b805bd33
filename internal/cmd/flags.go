package cmd

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolhost/toolhost/hub"
	"github.com/toolhost/toolhost/mcp"
	"github.com/toolhost/toolhost/mounts"
	"github.com/toolhost/toolhost/netproxy"
	"github.com/toolhost/toolhost/rpc"
)

// flags are the command line.
type flags struct {
	root, framing, artifactsDir, logLevel, logFile string
	readRoots                                      []string
	killGrace, eofGrace, defaultTimeout            time.Duration
	maxProcesses                                   int
	maxMessageBytes, outputLimit, artifactsCap     int64
	keepArtifacts, showVersion, debugMethods       bool
	noCgroups                                      bool

	sandbox, sandboxDefault, sandboxNetwork string
	writable                                []string
	// networkAllow are --network-allow's patterns; registries is
	// --network-allow-registries; protect and denyRead add to the
	// defaults (the agents' under `toolhost mcp`).
	networkAllow      []string
	registries        bool
	registriesGiven   bool // --network-allow-registries on the command line
	protect, denyRead []string
	limitMemory       byteSize
	limitPids         int64
	limitCPU          time.Duration
	debugNoLandlock   bool

	destinations         []hub.Spec
	connectDestinations  bool
	destinationBootstrap bool
	destinationRetry     int
	// taskTTL and taskTTLMax bound how long MCP tasks are kept.
	taskTTL, taskTTLMax time.Duration

	// persist, stateDir and linger: sessions that outlive their
	// connection (package persist).
	persist  bool
	stateDir string
	linger   time.Duration

	// approvals and approvalTimeout: asking the client's user about what
	// confinement refuses (package approval).
	approvals       string
	approvalTimeout time.Duration

	// mounts, secrets, clientMounts and mountMaxBytes: buckets shown to
	// confined commands as files (package mounts).
	mounts        []mounts.Spec
	secrets       string
	clientMounts  bool
	mountMaxBytes byteSize

	// snapshotMaxBytes and snapshotExclude configure the snapshot store.
	snapshotMaxBytes byteSize
	snapshotExclude  []string

	// http and the flags after it: MCP's Streamable HTTP, under
	// `toolhost mcp --http ADDR` (package httpgate, and mcp's transport).
	http, tlsCert, tlsKey            string
	httpPublicURL                    string
	httpTokenFile                    string
	oauthIssuer, oauthAudience       string
	httpNoAuth                       bool
	httpAllowHosts, httpAllowOrigins []string
	httpSessionTimeout               time.Duration
	httpMaxBody                      byteSize
	httpMaxConcurrent                int
}

// byteSize is a flag of bytes: a number with an optional K, M or G suffix
// (powers of 1024).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("not a size in bytes (a number, with K, M or G): %q", s)
	}
	*b = byteSize(n * mult)
	return nil
}

// newFlagSet declares the flags on a set named name.
func newFlagSet(name string, f *flags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.root, "root", "", "the workspace `dir`: commands run and files are read and written only inside it (default: the client's rootUri/rootPath); a client may narrow it, never widen it")
	fs.Func("read-root", "an extra read-only `dir` (repeatable): readable with readFile, never writable; a client may narrow these, never widen them", func(s string) error {
		f.readRoots = append(f.readRoots, s)
		return nil
	})
	fs.StringVar(&f.framing, "framing", rpc.FramingAuto, "message framing: auto (the first byte decides: 'C' for Content-Length headers, '{' or '[' for one JSON value per line), header or ndjson")
	fs.StringVar(&f.artifactsDir, "artifacts-dir", "", "the `dir` that keeps every command's full output (default: a private temporary directory, removed at the end)")
	fs.BoolVar(&f.keepArtifacts, "keep-artifacts", false, "keep the artifacts directory when the session ends")
	fs.Int64Var(&f.artifactsCap, "artifacts-cap-bytes", 1<<30, "the most `bytes` of artifacts kept; the oldest finished commands' output is removed first")
	fs.DurationVar(&f.killGrace, "kill-grace", 2*time.Second, "how long a command has between SIGTERM and SIGKILL when it is cancelled or times out")
	fs.DurationVar(&f.defaultTimeout, "default-timeout", 0, "the timeout of commands that give none (0: none)")
	fs.DurationVar(&f.eofGrace, "eof-grace", 30*time.Second, "how long requests in flight when stdin closes may take to finish before they are cancelled")
	fs.IntVar(&f.maxProcesses, "max-processes", 256, "the most commands running at once; beyond it requests fail with Busy (-32007)")
	fs.Int64Var(&f.maxMessageBytes, "max-message-bytes", 16<<20, "the largest message read, in `bytes`; a larger one is refused with TooLarge (-32006) and the session goes on")
	fs.Int64Var(&f.outputLimit, "output-limit-bytes", 64<<10, "the inline output kept per stream of a command, in `bytes` (head and tail)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&f.logFile, "log-file", "", "write logs to this `file` instead of stderr (never stdout)")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	fs.BoolVar(&f.noCgroups, "no-cgroups", false, "do not give commands cgroups of their own even where cgroup v2 allows; descendants are then found by the marker in their environment only")
	fs.StringVar(&f.sandbox, "sandbox", "auto", "confinement of commands by the kernel: auto (confined where the kernel can, with a warning otherwise), required (a command that cannot be confined as asked is refused with SandboxUnavailable, -32010) or off")
	fs.StringVar(&f.sandboxDefault, "sandbox-default", "workspace-write", "the filesystem confinement of a command that asks for none: workspace-write (writes only under the root, its own /tmp (TMPDIR), the root's cache and --writable), read-only (writes only its own /tmp) or full (no filesystem confinement); a client may tighten it, never loosen it")
	fs.StringVar(&f.sandboxNetwork, "sandbox-network", f.sandboxNetwork, "the network of a command that asks for none: on; off (no TCP connect or bind and no UDP outside its own loopback); or allow (a network namespace of its own whose only way out is toolhost's proxy, to the hosts of --network-allow and --network-allow-registries); a client may narrow it, never widen it")
	fs.Func("network-allow", "a `PATTERN` the network allow-list lets through, with --sandbox-network allow: host, *.domain, either with :port, or an IP literal with an optional port (repeatable)", func(s string) error {
		if _, err := netproxy.ParsePattern(s); err != nil {
			return err
		}
		f.networkAllow = append(f.networkAllow, s)
		return nil
	})
	fs.BoolVar(&f.registries, "network-allow-registries", f.registries, "with --sandbox-network allow, also let through the hosts the machine's Go, npm and pip are configured to use (go env GOPROXY GOSUMDB; npm's registry and pip's index, read from their settings files and environment), read at start")
	fs.Func("protect", "a `PATH` in the root a workspace-write command may read but not change (repeatable; **/.git/NAME is NAME in every repository of the root; adds to the defaults: **/.git/hooks and **/.git/config under toolhost mcp)", func(s string) error {
		f.protect = append(f.protect, s)
		return nil
	})
	fs.Func("deny-read", "a `PATH` a confined command cannot read, ~ being $HOME (repeatable; adds to the defaults: ~/.ssh, ~/.aws, ~/.config/gcloud, ~/.kube, ~/.docker, ~/.netrc and ~/.git-credentials under toolhost mcp)", func(s string) error {
		f.denyRead = append(f.denyRead, s)
		return nil
	})
	fs.Func("writable", "an extra `dir` confined commands may write in workspace-write mode (repeatable)", func(s string) error {
		f.writable = append(f.writable, s)
		return nil
	})
	fs.Var(&f.limitMemory, "limit-memory", "the most memory a command's process tree may use, in `bytes` (K, M, G suffixes); 0: none; a client may lower it")
	fs.Int64Var(&f.limitPids, "limit-pids", 0, "the most processes and threads a command's tree may hold at once; 0: none; a client may lower it")
	fs.DurationVar(&f.limitCPU, "limit-cpu", 0, "the most CPU time each process of a command may use (RLIMIT_CPU, whole seconds); 0: none; a client may lower it")
	fs.Func("destination", "`NAME=COMMAND`: a toolhost elsewhere that requests with destination NAME run on, reached through COMMAND's stdin and stdout (split as a shell would, never run by one), e.g. 'build=ssh -T build1 toolhost --root /srv/ws' (repeatable); clients choose among these, never add one", func(s string) error {
		d, err := hub.ParseSpec(s)
		if err != nil {
			return err
		}
		for _, o := range f.destinations {
			if o.Name == d.Name {
				return fmt.Errorf("destination %q given twice", d.Name)
			}
		}
		f.destinations = append(f.destinations, d)
		return nil
	})
	fs.BoolVar(&f.connectDestinations, "connect-destinations", false, "connect every destination at initialize, not at its first use")
	fs.BoolVar(&f.destinationBootstrap, "destination-bootstrap", false, "when a destination has no toolhost (its command exits 127) or another version, install this binary there over the same transport, into ~/.cache/toolhost/VERSION/, and start that; the destination's command must name the far program toolhost")
	fs.IntVar(&f.destinationRetry, "destination-retry", hub.DefaultRetry, "when a destination's transport drops (ssh or docker exec killed, the network gone) and its far toolhost runs with --persist, start its command again up to `COUNT` times (backoff from 100ms, doubling, at most 5s) to resume the far session: its commands go on and their results arrive once; only past these is each handle lost; 0: lose them at once")
	fs.DurationVar(&f.taskTTL, "task-ttl", mcp.DefaultTaskTTL, "MCP: how long a task (a command an MCP client follows as a task) and its result are kept after its creation when the client asks for no ttl; never while its command runs")
	fs.DurationVar(&f.taskTTLMax, "task-ttl-max", mcp.DefaultTaskTTLMax, "MCP: the longest ttl a client may ask a task to be kept for")
	fs.BoolVar(&f.persist, "persist", false, "the session outlives its connection: a transport that ends without shutdown (an editor reload, a crashed agent, a dropped ssh link) detaches it, its commands go on for --linger, and a later toolhost --persist resumes it by sessionId (initializationOptions.resume); its commands are held by a holder process per user and root, which the first toolhost --persist starts; under toolhost mcp, every connection with the same command line reaches the same session and its tasks (by their task ids), and it ends after --linger without one")
	fs.StringVar(&f.stateDir, "state-dir", "", "the `dir` of state that outlives a session: the journals of --persist, the snapshots, and the build caches (Go, npm, pip) kept per root for confined commands (default $XDG_STATE_HOME/toolhost, else ~/.local/state/toolhost); created 0700, and refused if another user owns it or others may enter it")
	fs.Func("mount", "`name=N,path=P,uri=U[,secret=ID][,rw]`: the objects under a bucket's prefix shown to confined commands as files at P, as the bucket was when each command started (URIs s3://bucket/prefix, r2://, gs://, az://container/prefix); read-only unless rw, whose changes are written back, conditionally, when each command ends; ID names a secret of --secrets or TOOLHOST_SECRET_<ID> (repeatable)", func(s string) error {
		m, err := mounts.ParseFlag(s)
		if err != nil {
			return err
		}
		f.mounts = append(f.mounts, m)
		return mounts.CheckSpecs(f.mounts)
	})
	fs.StringVar(&f.secrets, "secrets", "", "a JSON `file` of the mounts' credentials, {ID: {accessKeyId, secretAccessKey, sessionToken, accountName, accountKey, endpoint, region}}: owned by this user and readable by nobody else; no confined command can read it")
	fs.BoolVar(&f.clientMounts, "client-mounts", false, "let a client's initializationOptions.mounts replace the --mount flags (its secrets still the server's)")
	f.mountMaxBytes = 2 << 30
	fs.Var(&f.mountMaxBytes, "mount-max-bytes", "the most `bytes` a mount may hold (K, M, G suffixes): a bucket listing more, or more than 100,000 objects, is refused before anything is fetched")
	f.snapshotMaxBytes = 2 << 30
	fs.Var(&f.snapshotMaxBytes, "snapshot-max-bytes", "the most `bytes` the snapshot store of --state-dir may hold (K, M, G suffixes); a snapshot that would pass it is refused with SnapshotTooLarge (-32031)")
	fs.Func("snapshot-exclude", "a gitignore `PATTERN` left out of every snapshot, besides .git/ (repeatable)", func(s string) error {
		f.snapshotExclude = append(f.snapshotExclude, s)
		return nil
	})
	fs.StringVar(&f.approvals, "approvals", "ask", "what a confined command's refused connection becomes: ask (the client's user is asked, when the client declared capabilities.approvals; otherwise it is refused) or deny (refused, nobody asked)")
	fs.DurationVar(&f.approvalTimeout, "approval-timeout", 60*time.Second, "how long an ask waits for the user's answer; past it the ask is denied (\"no answer\")")
	fs.DurationVar(&f.linger, "linger", 10*time.Minute, "with --persist, how long a detached session's commands go on before they are killed and the session ends")
	fs.StringVar(&f.http, "http", "", "under toolhost mcp: serve MCP's Streamable HTTP at http(s)://`ADDR`/mcp instead of stdio (host:port; a loopback address unless --tls-cert and --tls-key are given); one of --http-token-file, --oauth-issuer or --http-no-auth is required")
	fs.StringVar(&f.httpPublicURL, "http-public-url", "", "with --http, the `URL` of /mcp as clients reach it when that is not the listener's address (a tunnel's or a proxy's https://NAME/mcp): OAuth's resource and metadata name it, and its host is allowed as --http-allow-host would")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "with --http, the TLS certificate `file` (PEM, the chain); needs --tls-key")
	fs.StringVar(&f.tlsKey, "tls-key", "", "with --http, the TLS private key `file` (PEM)")
	fs.StringVar(&f.httpTokenFile, "http-token-file", "", "with --http, the bearer token clients must send (Authorization: Bearer TOKEN), read from `file`; a missing file is made with 256 random bits, mode 0600; one readable by others is refused")
	fs.StringVar(&f.oauthIssuer, "oauth-issuer", "", "with --http, accept JWTs of this OAuth authorization server `URL` (its metadata and JWKS are fetched; https, or http on loopback); needs --oauth-audience; the token's sub is the principal")
	fs.StringVar(&f.oauthAudience, "oauth-audience", "", "with --oauth-issuer, the `AUD` a token's aud must hold (this server's resource URL, usually)")
	fs.BoolVar(&f.httpNoAuth, "http-no-auth", false, "with --http on a loopback address, serve without authentication (anyone on this machine can then run commands)")
	fs.Func("http-allow-host", "with --http, a `HOST` (or host:port) a request's Host header may name besides the listener's own address, e.g. a tunnel's name (repeatable); any other is refused with 403 (DNS rebinding)", func(s string) error {
		f.httpAllowHosts = append(f.httpAllowHosts, s)
		return nil
	})
	fs.Func("http-allow-origin", "with --http, an `ORIGIN` (scheme://host[:port]) a browser's request may come from (repeatable); a request with any other Origin is refused with 403, one with none passes", func(s string) error {
		f.httpAllowOrigins = append(f.httpAllowOrigins, s)
		return nil
	})
	fs.DurationVar(&f.httpSessionTimeout, "http-session-timeout", 30*time.Minute, "with --http, how long an HTTP session may go without a request before it is closed (its commands and tasks go on)")
	f.httpMaxBody = 4 << 20
	fs.Var(&f.httpMaxBody, "http-max-body", "with --http, the largest request body in `bytes` (K, M, G suffixes); a larger one is refused with 413")
	fs.IntVar(&f.httpMaxConcurrent, "http-max-concurrent", 256, "with --http, the most requests one principal may have in flight at once (open streams included: every client of one token is one principal, and most hold a stream open); beyond it, 429")
	fs.BoolVar(&f.debugNoLandlock, "debug-no-landlock", false, "behave as on a kernel without Landlock, for testing --sandbox")
	fs.BoolVar(&f.debugMethods, "debug-methods", false, "also serve debug/panic and debug/sleep, for testing a client or the server itself")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage:\n  toolhost [flags]       serve JSON-RPC 2.0 on stdin/stdout (MCP when the first message is an MCP initialize or server/discover)\n  toolhost mcp [flags]   serve the Model Context Protocol on stdin/stdout\n  toolhost demo [flags]  play a short session against a temporary workspace (--mcp: an MCP session)\n  toolhost approvals list|revoke  the always grants of approval/request, from a shell\n  toolhost holder ...    the holder of --persist's sessions, which toolhost --persist starts itself\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// The agents' defaults, under `toolhost mcp` (BRIEF Parts 3 and 4): the
// hooks and config of every repository in the root are read-only, and the
// usual places of credentials are not readable.
var (
	agentProtect  = []string{"**/.git/hooks", "**/.git/config"}
	agentDenyRead = []string{"~/.ssh", "~/.aws", "~/.config/gcloud", "~/.kube", "~/.docker", "~/.netrc", "~/.git-credentials"}
)

// defaults sets the defaults of the flags that differ under `toolhost
// mcp` (agent): agents are safe by default, builds reach their
// registries and nothing else, and secrets are neither read nor the
// repository's hooks changed.
func (f *flags) defaults(agent bool) {
	f.sandboxNetwork = "on"
	if agent {
		f.sandboxNetwork, f.registries = "allow", true
		f.protect = slices.Clone(agentProtect)
		f.denyRead = slices.Clone(agentDenyRead)
	}
}
