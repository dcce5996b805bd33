package cmd

import (
	"context"
	cryptotls "crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/capture"
	"github.com/toolhost/toolhost/httpgate"
	"github.com/toolhost/toolhost/mcp"
)

// checkHTTP checks the flags of `toolhost mcp --http` (issue 37) before
// anything is opened: the listener's own refusals (an address off
// loopback without TLS, no auth off loopback) are the gate's, at start.
func (cl *commandLine) checkHTTP(cwd string) error {
	f := &cl.flags
	if f.http == "" {
		for name, set := range map[string]bool{
			"--tls-cert": f.tlsCert != "", "--tls-key": f.tlsKey != "", "--http-token-file": f.httpTokenFile != "",
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
	if f.persist {
		return errors.New("--http with --persist (the holder serving HTTP) is not built yet: run toolhost mcp --http without --persist")
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

// serveHTTP serves `toolhost mcp --http ADDR`: one shared MCP server,
// whose toolhost session every HTTP session reaches, behind the gate
// (Host, Origin, auth, a cap per principal) on a listener of bounded
// connections. It serves until a signal, and returns the exit code.
func (cl *commandLine) serveHTTP(version string, stderr io.Writer, logger *slog.Logger) int {
	f := &cl.flags
	tls := f.tlsCert != ""
	if err := httpgate.CheckListen(f.http, tls, f.httpNoAuth, f.oauthIssuer); err != nil {
		fmt.Fprintf(stderr, "toolhost: --http: %v\n", err)
		return 2
	}
	var tlsConf *cryptotls.Config
	if tls {
		cert, err := cryptotls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			fmt.Fprintf(stderr, "toolhost: --tls-cert, --tls-key: %v\n", err)
			return 2
		}
		tlsConf = &cryptotls.Config{Certificates: []cryptotls.Certificate{cert}, MinVersion: cryptotls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", f.http)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: --http: %v\n", err)
		return 2
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	endpoint := scheme + "://" + ln.Addr().String() + "/mcp"
	authn, err := cl.httpAuth(endpoint, logger)
	if err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 2
	}

	reg := registries{log: logger}
	defer reg.stop()
	if cl.wantsRegistries() {
		reg.start()
	}
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	swept := make(chan struct{})
	go func() { // owned by serveHTTP, which waits on swept
		defer close(swept)
		capture.SweepTempDirs("", logger)
	}()
	defer func() { <-swept }()

	s := cl.session(version, &reg, logger)
	opts := s.mcp
	opts.Shared = true
	ms := mcp.New(s.tools, s.rpc, opts)
	hh := ms.HTTPHandler(mcp.HTTPOptions{
		MaxBody:        int64(f.httpMaxBody),
		SessionTimeout: f.httpSessionTimeout,
		Principal:      func(r *http.Request) string { return httpgate.PrincipalOf(r.Context()) },
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", hh)
	gate, err := httpgate.New(httpgate.Config{Addr: ln.Addr().String(), TLS: tls, AllowHosts: f.httpAllowHosts, AllowOrigins: f.httpAllowOrigins,
		Auth: authn, MaxConcurrent: f.httpMaxConcurrent, Log: logger}, mux)
	if err != nil {
		ln.Close()
		ms.Close("the HTTP gate cannot start")
		fmt.Fprintf(stderr, "toolhost: --http: %v\n", err)
		return 2
	}
	srv := httpgate.Server(gate, logger)
	srv.TLSConfig = tlsConf
	served := make(chan error, 1)
	go func() { // owned by serveHTTP, which waits on served
		l := httpgate.LimitListener(ln, httpgate.DefaultMaxConns)
		if tls {
			served <- srv.ServeTLS(l, "", "")
		} else {
			served <- srv.Serve(l)
		}
	}()
	// Stdout belongs to the protocol, which here is HTTP: where to reach
	// it is said on stderr (and in the log).
	fmt.Fprintf(stderr, "toolhost: serving MCP at %s\n", endpoint)
	logger.Info("serving MCP over HTTP", "endpoint", endpoint, "auth", fmt.Sprint(authn))

	var reason string
	select {
	case sig := <-sigs:
		reason = "signal " + sig.String()
	case <-ms.Done():
		reason = "the toolhost session ended"
	case err := <-served:
		reason = fmt.Sprintf("the listener failed: %v", err)
		served <- err
	}
	logger.Info("the HTTP server ends", "reason", reason)
	ctx, cancel := context.WithTimeout(context.Background(), httpShutdownGrace)
	hh.Close() // every session's streams end, so Shutdown need not wait for them
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close()
	}
	cancel()
	<-served
	ms.Close(reason)
	if strings.HasPrefix(reason, "the listener failed") {
		return 1
	}
	return 0
}

// httpAuth is the gate's authenticator of the command line: the bearer
// token of --http-token-file (made if missing), the JWTs of
// --oauth-issuer, or none.
func (cl *commandLine) httpAuth(endpoint string, logger *slog.Logger) (httpgate.Authenticator, error) {
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
		o, err := httpgate.NewOAuth(ctx, httpgate.OAuthConfig{Issuer: f.oauthIssuer, Audience: f.oauthAudience, Resource: endpoint, Log: logger})
		if err != nil {
			return nil, fmt.Errorf("--oauth-issuer: %w", err)
		}
		return o, nil
	}
	return httpgate.NoAuth(), nil
}
