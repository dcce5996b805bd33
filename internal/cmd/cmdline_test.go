package cmd

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseFrontCommandLineAsTheFront: a holder parses a front's command
// line as the front would have, with its directory and its $HOME.
func TestParseFrontCommandLineAsTheFront(t *testing.T) {
	cl, err := parseFrontCommandLine(
		[]string{"mcp", "--root", "ws", "--read-root", "../docs", "--artifacts-dir", "/abs", "--deny-read", "~/secret"},
		"/home/u/src", []string{"HOME=/home/old", "HOME=/home/u"})
	if err != nil {
		t.Fatal(err)
	}
	got := struct {
		Sub, Root, ArtifactsDir, Home string
		ReadRoots, DenyRead           []string
		Network                       string
	}{cl.sub, cl.root, cl.artifactsDir, cl.sandbox.Home, cl.readRoots, cl.denyRead, cl.sandboxNetwork}
	want := struct {
		Sub, Root, ArtifactsDir, Home string
		ReadRoots, DenyRead           []string
		Network                       string
	}{"mcp", "/home/u/src/ws", "/abs", "/home/u", []string{"/home/u/docs"}, append(append([]string{}, agentDenyRead...), "~/secret"), "allow"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestParseCommandLineRefuses: each refusal is an error that says what
// is wrong; a flag's is a usageError, which names the flag.
func TestParseCommandLineRefuses(t *testing.T) {
	for _, c := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"--bogus"}, true, "flag provided but not defined: -bogus"},
		{[]string{"--root", "/w", "extra"}, true, `unexpected argument "extra"`},
		{[]string{"--framing", "xml"}, false, `--framing must be auto, header or ndjson, not "xml"`},
		{[]string{"demo", "--persist"}, false, "--persist is not supported with demo"},
		{[]string{"--network-allow", "example.com"}, false, "--network-allow needs --sandbox-network allow, not on"},
		{[]string{"--sandbox", "off", "--limit-pids", "5"}, false, "need --sandbox auto or required, not off"},
	} {
		_, err := parseCommandLine(c.args, "", nil, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseCommandLine(%q) = %v, want an error saying %q", c.args, err, c.want)
			continue
		}
		if isUsage := errors.As(err, new(usageError)); isUsage != c.usage {
			t.Errorf("parseCommandLine(%q): usageError %v, want %v", c.args, isUsage, c.usage)
		}
	}
	if _, err := parseCommandLine([]string{"--help"}, "", nil, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v, want flag.ErrHelp", err)
	}
	if _, err := parseFrontCommandLine([]string{"--bogus"}, "/", nil); err == nil || err.Error() != "the command line: flag provided but not defined: -bogus" {
		t.Errorf("a front's bad flag: %v", err)
	}
}

// TestSplitHTTPArgs takes a --persist --http front's HTTP flags out of
// its command line, each with its value, in order.
func TestSplitHTTPArgs(t *testing.T) {
	args := []string{"--root", "/r", "--persist", "--http", "127.0.0.1:0", "--linger=1m", "--http-token-file=/t", "--http-no-auth", "--http-allow-host", "a.example", "--kill-grace", "1s", "-tls-cert", "c"}
	rest, http := splitHTTPArgs(args)
	if diff := cmp.Diff([]string{"--root", "/r", "--persist", "--linger=1m", "--kill-grace", "1s"}, rest); diff != "" {
		t.Errorf("the other flags: mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"--http", "127.0.0.1:0", "--http-token-file=/t", "--http-no-auth", "--http-allow-host", "a.example", "-tls-cert", "c"}, http); diff != "" {
		t.Errorf("the HTTP flags: mismatch (-want +got):\n%s", diff)
	}
}
