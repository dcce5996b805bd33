package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"
)

// downloadSize is the download of BenchmarkDownload, the figure.
const downloadSize = 100 << 20

// benchConfig is the proxy's configuration in the benchmarks: timeouts on,
// as a command's proxy has them, so that their cost is measured.
func benchConfig(b *testing.B, patterns ...string) Config {
	return Config{Allow: allow(b, patterns...), IdleTimeout: time.Minute, TotalTimeout: time.Hour, MaxConns: 64}
}

// readAll reads c to its end with a 256 KiB buffer, the same for the
// direct and the proxied download, and returns the count.
func readAll(b *testing.B, r io.Reader, buf []byte) int64 {
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchCONNECT opens a tunnel to target through the proxy.
func benchCONNECT(b *testing.B, proxyAddr, target string) (net.Conn, *bufio.Reader) {
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReaderSize(c, 64<<10)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("CONNECT %s: %v %v", target, resp, err)
	}
	return c, br
}

// BenchmarkDownload downloads 100 MB from a loopback HTTP origin (a
// Content-Length response): directly, through a CONNECT tunnel ("proxy")
// and as a plain absolute-URI request the proxy forwards ("http"), and
// reports each proxied throughput as a fraction of the direct one's
// ("x-direct"; the target is ≥ 0.8). Run them together:
// -bench 'Download$'.
func BenchmarkDownload(b *testing.B) {
	chunk := make([]byte, 1<<20)
	origin := startTCP(b, "tcp", "127.0.0.1:0", func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", downloadSize)
			for range downloadSize / len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}
	})
	target := origin.Addr().String()
	_, proxyAddr := startProxy(b, benchConfig(b, target))
	buf := make([]byte, 256<<10)

	// get sends a GET for uri on c and reads the response's body.
	get := func(b *testing.B, c net.Conn, br *bufio.Reader, uri string) {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", uri, target)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %v %v", uri, resp, err)
		}
		if got := readAll(b, resp.Body, buf); got != downloadSize {
			b.Fatalf("read %d bytes", got)
		}
	}
	var direct float64 // bytes per second
	run := func(name string, download func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(downloadSize)
			n := 0
			for b.Loop() {
				download(b)
				n++
			}
			rate := float64(n) * downloadSize / b.Elapsed().Seconds()
			if name == "direct" {
				direct = rate
			} else if direct > 0 {
				b.ReportMetric(rate/direct, "x-direct")
			}
		})
	}
	run("direct", func(b *testing.B) {
		c, err := net.Dial("tcp", target)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		get(b, c, bufio.NewReaderSize(c, 64<<10), "/")
	})
	run("proxy", func(b *testing.B) {
		c, br := benchCONNECT(b, proxyAddr, target)
		defer c.Close()
		get(b, c, br, "/")
	})
	run("http", func(b *testing.B) {
		c, err := net.Dial("tcp", proxyAddr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		get(b, c, bufio.NewReaderSize(c, 64<<10), "http://"+target+"/")
	})
}

// BenchmarkConnect measures connection setup through the proxy — dial,
// request, checked answer, dial upstream, reply — for CONNECT and SOCKS5,
// and reports the median ("p50-ms"; the target is ≤ 1 ms) beside
// a direct dial of the same server.
func BenchmarkConnect(b *testing.B) {
	origin := startTCP(b, "tcp", "127.0.0.1:0", echo)
	target := origin.Addr().String()
	port := portOf(b, target)
	_, proxyAddr := startProxy(b, benchConfig(b, target))

	measure := func(b *testing.B, setup func() net.Conn) {
		var ds []time.Duration
		for b.Loop() {
			start := time.Now()
			c := setup()
			ds = append(ds, time.Since(start))
			c.Close()
		}
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2])/float64(time.Millisecond), "p50-ms")
	}
	b.Run("direct", func(b *testing.B) {
		measure(b, func() net.Conn {
			c, err := net.Dial("tcp", target)
			if err != nil {
				b.Fatal(err)
			}
			return c
		})
	})
	b.Run("CONNECT", func(b *testing.B) {
		measure(b, func() net.Conn {
			c, _ := benchCONNECT(b, proxyAddr, target)
			return c
		})
	})
	b.Run("SOCKS5", func(b *testing.B) {
		req := socksRequestBytes(socksCmdConnect, "127.0.0.1", port)
		measure(b, func() net.Conn {
			c, err := net.Dial("tcp", proxyAddr)
			if err != nil {
				b.Fatal(err)
			}
			if code := socksExchange(b, c, []byte{5, 1, 0}, req); code != socksSucceeded {
				b.Fatalf("reply %#x", code)
			}
			return c
		})
	})
}
