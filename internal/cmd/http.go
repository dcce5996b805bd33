package cmd

import (
	"context"
	cryptotls "crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/httpgate"
	"github.com/toolhost/toolhost/mcp"
	"github.com/toolhost/toolhost/persist"
)

// checkHTTP checks the flags of `toolhost mcp --http` (issue 37) before
// anything is opened: the listener's own refusals (an address off
// loopback without TLS, no auth off loopback) are the gate's, at start.
func (cl *commandLine) checkHTTP(cwd string) error {
	f := &cl.flags
	if f.http == "" {
		for name, set := range map[string]bool{
			"--http-public-url": f.httpPublicURL != "", "--tls-cert": f.tlsCert != "", "--tls-key": f.tlsKey != "", "--http-token-file": f.httpTokenFile != "",
			"--oauth-issuer": f.oauthIssuer != "", "--oauth-audience": f.oauthAudience != "", "--http-no-auth": f.httpNoAuth,
			"--http-allow-host": len(f.httpAllowHosts) > 0, "--http-allow-origin": len(f.httpAllowOrigins) > 0,
		} {
			if set {
				return fmt.Errorf("%s is a flag of --http, which is not given", name)
			}
		}
		return nil
	}
	if cl.sub != subMCP {
		return errors.New("--http serves MCP: run toolhost mcp --http ADDR")
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if (f.oauthIssuer == "") != (f.oauthAudience == "") {
		return errors.New("--oauth-issuer and --oauth-audience go together")
	}
	modes := 0
	for _, set := range []bool{f.httpTokenFile != "", f.oauthIssuer != "", f.httpNoAuth} {
		if set {
			modes++
		}
	}
	switch {
	case modes == 0:
		return errors.New("--http needs a way to authenticate clients: --http-token-file FILE, --oauth-issuer URL with --oauth-audience AUD, or (on a loopback address only) --http-no-auth")
	case modes > 1:
		return errors.New("give only one of --http-token-file, --oauth-issuer and --http-no-auth")
	}
	if f.httpMaxBody <= 0 {
		return fmt.Errorf("--http-max-body must be positive, not %d", f.httpMaxBody)
	}
	if f.httpPublicURL != "" {
		u, err := url.Parse(f.httpPublicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != "/mcp" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("--http-public-url must be the http(s) URL of /mcp as clients reach it, such as https://NAME/mcp, not %q", f.httpPublicURL)
		}
	}
	if f.httpMaxConcurrent <= 0 {
		return fmt.Errorf("--http-max-concurrent must be positive, not %d", f.httpMaxConcurrent)
	}
	if f.httpSessionTimeout < 0 {
		return fmt.Errorf("--http-session-timeout must not be negative, not %v", f.httpSessionTimeout)
	}
	if cwd != "" {
		for _, p := range []*string{&f.tlsCert, &f.tlsKey, &f.httpTokenFile} {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(cwd, *p)
			}
		}
	}
	return nil
}

// httpShutdownGrace bounds how long the listener waits for requests in
// flight once the server ends; a stream still open past it is cut.
const httpShutdownGrace = 5 * time.Second

// httpListener serves a shared MCP server over Streamable HTTP at /mcp,
// behind the gate (Host, Origin, auth, a cap per principal), on a
// listener of bounded connections. It is `toolhost mcp --http`'s, or a
// holder's for `toolhost mcp --persist --http` (persist.MCPListener).
type httpListener struct {
	endpoint string
	hh       *mcp.HTTPHandler
	srv      *http.Server
	// served receives the listener's end (Serve's error), once; Close
	// waits for it.
	served    chan error
	closeOnce sync.Once
}

// listenHTTP opens the HTTP listener of the command line's flags for ms,
// which must be shared. Its refusals (an address off loopback without
// TLS, a token file others can read, an issuer that cannot be reached)
// are the command line's errors.
func (cl *commandLine) listenHTTP(ms *mcp.Server, logger *slog.Logger, attach func() func()) (*httpListener, error) {
	f := &cl.flags
	tls := f.tlsCert != ""
	if err := httpgate.CheckListen(f.http, tls, f.httpNoAuth, f.oauthIssuer); err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	var tlsConf *cryptotls.Config
	if tls {
		cert, err := cryptotls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
		tlsConf = &cryptotls.Config{Certificates: []cryptotls.Certificate{cert}, MinVersion: cryptotls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", f.http)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	l := &httpListener{endpoint: scheme + "://" + ln.Addr().String() + "/mcp", served: make(chan error, 1)}
	// The resource OAuth names is the URL clients use: the public one
	// (a tunnel's), whose host is then one this listener answers to.
	resource, allowHosts := l.endpoint, slices.Clone(f.httpAllowHosts)
	if f.httpPublicURL != "" {
		resource = f.httpPublicURL
		u, _ := url.Parse(f.httpPublicURL) // checked by checkHTTP
		allowHosts = append(allowHosts, u.Host)
	}
	authn, err := cl.httpAuth(resource, logger)
	if err != nil {
		ln.Close()
		return nil, err
	}
	l.hh = ms.HTTPHandler(mcp.HTTPOptions{
		MaxBody:        int64(f.httpMaxBody),
		SessionTimeout: f.httpSessionTimeout,
		Principal:      func(r *http.Request) string { return httpgate.PrincipalOf(r.Context()) },
		Attach:         attach,
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", l.hh)
	gate, err := httpgate.New(httpgate.Config{Addr: ln.Addr().String(), TLS: tls, AllowHosts: allowHosts, AllowOrigins: f.httpAllowOrigins,
		Auth: authn, MaxConcurrent: f.httpMaxConcurrent, Log: logger}, mux)
	if err != nil {
		ln.Close()
		l.hh.Close()
		return nil, fmt.Errorf("--http: %w", err)
	}
	l.srv = httpgate.Server(gate, logger)
	l.srv.TLSConfig = tlsConf
	go func() { // owned by l, whose Close waits on served
		lim := httpgate.LimitListener(ln, httpgate.DefaultMaxConns)
		if tls {
			l.served <- l.srv.ServeTLS(lim, "", "")
		} else {
			l.served <- l.srv.Serve(lim)
		}
	}()
	logger.Info("serving MCP over HTTP", "endpoint", l.endpoint, "auth", fmt.Sprint(authn))
	return l, nil
}

// Endpoint is the URL of /mcp.
func (l *httpListener) Endpoint() string { return l.endpoint }

// Close ends every HTTP session (their streams end, so that Shutdown need
// not wait for them) and the listener, and returns once it is closed. The
// MCP server goes on.
func (l *httpListener) Close() {
	l.closeOnce.Do(func() {
		l.hh.Close()
		ctx, cancel := context.WithTimeout(context.Background(), httpShutdownGrace)
		if err := l.srv.Shutdown(ctx); err != nil {
			l.srv.Close()
		}
		cancel()
		<-l.served
	})
}

// serveHTTP serves `toolhost mcp --http ADDR`: one shared MCP server,
// whose toolhost session every HTTP session reaches, until a signal. It
// returns the exit code.
func (cl *commandLine) serveHTTP(version string, stderr io.Writer, logger *slog.Logger) int {
	reg := registries{log: logger}
	defer reg.stop()
	if cl.wantsRegistries() {
		reg.start()
	}
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	defer sweepDeadServers(logger)()

	s := cl.session(version, &reg, logger)
	opts := s.mcp
	opts.Shared = true
	ms := mcp.New(s.tools, s.rpc, opts)
	l, err := cl.listenHTTP(ms, logger, nil)
	if err != nil {
		ms.Close("the HTTP listener cannot start")
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	}
	// Stdout belongs to the protocol, which here is HTTP: where to reach
	// it is said on stderr (and in the log).
	fmt.Fprintf(stderr, "toolhost: serving MCP at %s\n", l.endpoint)

	var reason string
	code := 0
	select {
	case sig := <-sigs:
		reason = "signal " + sig.String()
	case <-ms.Done():
		reason = "the toolhost session ended"
	case err := <-l.served:
		reason, code = fmt.Sprintf("the listener failed: %v", err), 1
		l.served <- err
	}
	logger.Info("the HTTP server ends", "reason", reason)
	l.Close()
	ms.Close(reason)
	return code
}

// httpAuth is the gate's authenticator of the command line: the bearer
// token of --http-token-file (made if missing), the JWTs of
// --oauth-issuer for the resource at URL resource, or none.
func (cl *commandLine) httpAuth(resource string, logger *slog.Logger) (httpgate.Authenticator, error) {
	f := &cl.flags
	switch {
	case f.httpTokenFile != "":
		tok, err := httpgate.LoadOrCreateToken(f.httpTokenFile)
		if err != nil {
			return nil, fmt.Errorf("--http-token-file: %w", err)
		}
		return tok, nil
	case f.oauthIssuer != "":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		o, err := httpgate.NewOAuth(ctx, httpgate.OAuthConfig{Issuer: f.oauthIssuer, Audience: f.oauthAudience, Resource: resource, Log: logger})
		if err != nil {
			return nil, fmt.Errorf("--oauth-issuer: %w", err)
		}
		return o, nil
	}
	return httpgate.NoAuth(), nil
}

// httpFlags are the flags of --http: a --persist front hands them to the
// holder apart from the others, so that its shared MCP server is the
// same as stdio fronts' of the same other flags.
var httpFlags = map[string]bool{
	"http": true, "http-public-url": true, "tls-cert": true, "tls-key": true, "http-token-file": true,
	"oauth-issuer": true, "oauth-audience": true, "http-no-auth": true,
	"http-allow-host": true, "http-allow-origin": true,
	"http-session-timeout": true, "http-max-body": true, "http-max-concurrent": true,
}

// splitHTTPArgs splits a command line (parsed already, so well formed)
// into its HTTP flags and the others, each in its order, a flag with its
// value.
func splitHTTPArgs(args []string) (rest, httpArgs []string) {
	fs := newFlagSet("toolhost", &flags{}, io.Discard)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			return append(rest, args[i:]...), httpArgs
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		group := []string{a}
		if fl := fs.Lookup(name); fl != nil && !hasValue && !isBoolFlag(fl) && i+1 < len(args) {
			i++
			group = append(group, args[i])
		}
		if httpFlags[name] {
			httpArgs = append(httpArgs, group...)
		} else {
			rest = append(rest, group...)
		}
	}
	return rest, httpArgs
}

// isBoolFlag reports whether fl is a boolean flag, which takes no value
// of its own.
func isBoolFlag(fl *flag.Flag) bool {
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// listenMCP is the holder's persist.ListenMCP: the HTTP listener of a
// --persist --http front's flags for its shared server, made by the
// holder's ConfigureMCP (an *mcp.Server).
func listenMCP(srv persist.SharedMCP, args, httpArgs, env []string, cwd string, logs io.Writer, attach func() func()) (persist.MCPListener, error) {
	ms, ok := srv.(*mcp.Server)
	if !ok {
		return nil, fmt.Errorf("the shared server is a %T, not toolhost's MCP server", srv)
	}
	cl, err := parseFrontCommandLine(append(slices.Clone(args), httpArgs...), cwd, env)
	if err != nil {
		return nil, err
	}
	logger, _, err := newLogger(cl.logLevel, "", logs)
	if err != nil {
		return nil, err
	}
	return cl.listenHTTP(ms, logger, attach)
}
