package netproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// curl runs curl with args and no proxy variables of its own, and returns
// its standard output, standard error and exit code.
func curl(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	bin, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed: the second real client is skipped (net/http and the SOCKS5 client above still run)")
	}
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"-sS", "--noproxy", ""}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestCurl drives the proxy with curl: plain HTTP with -x, HTTPS through
// CONNECT, SOCKS5 with names resolved by the proxy (--socks5-hostname),
// an upload large enough for curl to send Expect: 100-continue, and the
// refusals of each.
func TestCurl(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "plain %s %d", r.Method, n)
	}))
	t.Cleanup(plain.Close)
	tlsOrigin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls") }))
	t.Cleanup(tlsOrigin.Close)
	plainHP, tlsHP := plain.Listener.Addr().String(), tlsOrigin.Listener.Addr().String()
	plainPort := portOf(t, plainHP)
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the denied origin was reached") }))
	t.Cleanup(denied.Close)
	deniedHP := denied.Listener.Addr().String()

	_, proxyAddr := startProxy(t, Config{
		Allow:    allow(t, plainHP, tlsHP, fmt.Sprintf("origin.test:%d", plainPort)),
		Resolver: resolverFor("origin.test=127.0.0.1", "loop.test=127.0.0.1"),
	})
	proxyURL := "http://" + proxyAddr

	t.Run("plain HTTP", func(t *testing.T) {
		out, errOut, code := curl(t, "-x", proxyURL, plain.URL+"/a")
		if code != 0 || out != "plain GET 0" {
			t.Errorf("curl = %d %q %q", code, out, errOut)
		}
	})
	t.Run("upload with Expect 100-continue", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "body")
		os.WriteFile(f, bytes.Repeat([]byte("x"), 2<<20), 0o600)
		out, errOut, code := curl(t, "-x", proxyURL, "--data-binary", "@"+f, "-H", "Expect: 100-continue", plain.URL+"/up")
		if code != 0 || out != fmt.Sprintf("plain POST %d", 2<<20) {
			t.Errorf("curl = %d %q %q", code, out, errOut)
		}
	})
	t.Run("HTTPS through CONNECT", func(t *testing.T) {
		out, errOut, code := curl(t, "-k", "-x", proxyURL, tlsOrigin.URL+"/")
		if code != 0 || out != "tls" {
			t.Errorf("curl = %d %q %q", code, out, errOut)
		}
	})
	t.Run("SOCKS5 with a name", func(t *testing.T) {
		// origin.test resolves to loopback, so the literal is needed too:
		// it is listed (plainHP).
		out, errOut, code := curl(t, "--socks5-hostname", proxyAddr, fmt.Sprintf("http://origin.test:%d/s", plainPort))
		if code != 0 || out != "plain GET 0" {
			t.Errorf("curl = %d %q %q", code, out, errOut)
		}
	})
	t.Run("plain HTTP denied", func(t *testing.T) {
		out, errOut, code := curl(t, "-x", proxyURL, "-w", "\n%{http_code}", denied.URL+"/")
		if want := refusal(deniedHP) + "\n\n403"; code != 0 || out != want {
			t.Errorf("curl = %d %q %q, want %q", code, out, errOut, want)
		}
	})
	t.Run("HTTPS denied", func(t *testing.T) {
		_, errOut, code := curl(t, "-k", "-x", proxyURL, "https://"+deniedHP+"/")
		if code == 0 || !strings.Contains(errOut, "403") {
			t.Errorf("curl = %d %q, want a failed CONNECT with 403", code, errOut)
		}
	})
	t.Run("SOCKS5 denied", func(t *testing.T) {
		_, errOut, code := curl(t, "--socks5-hostname", proxyAddr, "http://"+deniedHP+"/")
		if code == 0 {
			t.Errorf("curl = %d %q, want a refused SOCKS5 connection", code, errOut)
		}
		_, errOut, code = curl(t, "--socks5-hostname", proxyAddr, fmt.Sprintf("http://loop.test:%d/", plainPort))
		if code == 0 {
			t.Errorf("curl to a name not listed = %d %q, want refused", code, errOut)
		}
	})
}
