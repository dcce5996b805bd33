package netproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// Headers of the proxy's own answers. A refusal by policy (403) or a
// limit (503) carries RefusalHeader; a network fault (502, 504) carries
// NetworkErrorHeader. Each holds the same text as the body.
const (
	RefusalHeader      = "X-Toolhost-Refused"
	NetworkErrorHeader = "X-Toolhost-Network-Error"
)

// maxDrainBytes is how much of a refused request's body the proxy reads
// away to keep the connection; beyond it, it closes the connection.
const maxDrainBytes = 256 << 10

// hopHeaders are removed from forwarded requests and responses, with the
// headers Connection names and every Proxy-* header.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// serveHTTP serves HTTP requests on the session until the connection
// ends: a CONNECT becomes a tunnel; absolute-URI requests are forwarded,
// each checked on its own, however many a kept-alive connection carries.
func (p *Proxy) serveHTTP(s *session) {
	fw := &forwarder{s: s, bw: bufio.NewWriterSize(s.client, bodyBuffer)}
	defer fw.closeUpstream()
	for {
		s.lr.N = maxHeaderBytes
		req, err := http.ReadRequest(s.br)
		if err != nil || s.lr.N <= 0 {
			if s.lr.N <= 0 {
				writeAnswer(s.client, http.StatusRequestHeaderFieldsTooLarge, "", fmt.Sprintf("toolhost: the request's header is over %d bytes", maxHeaderBytes), true)
				return
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !isTimeout(err) && !errors.Is(err, net.ErrClosed) {
				writeAnswer(s.client, http.StatusBadRequest, "", "toolhost: malformed HTTP request to the proxy: "+err.Error(), true)
			}
			return
		}
		s.unboundedHeader()
		if req.Method == http.MethodConnect {
			p.serveCONNECT(s, req)
			return
		}
		if !fw.forward(req) {
			return
		}
	}
}

// serveCONNECT answers a CONNECT and, if allowed, tunnels.
func (p *Proxy) serveCONNECT(s *session, req *http.Request) {
	host, port, err := splitHostPort(req.URL.Host, 443)
	if err != nil {
		writeAnswer(s.client, http.StatusBadRequest, "", "toolhost: CONNECT needs host:port: "+err.Error(), true)
		return
	}
	up, counts, err := s.connect("connect", host, port)
	if err != nil {
		writeError(s.client, err, true)
		return
	}
	defer p.untrack(up)
	if _, err := io.WriteString(s.client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	s.tunnel(up, counts, s.buffered())
}

// forwarder forwards a client connection's plain-HTTP requests, keeping
// one upstream connection while consecutive requests go to the same host
// and port. Only the session's handler goroutine uses it.
type forwarder struct {
	s  *session
	bw *bufio.Writer // to the client
	// up is the upstream connection, to key, or nil; upr reads it.
	up  *timedConn
	key hostPort
	upr *bufio.Reader
}

// closeUpstream closes the upstream connection, if any.
func (f *forwarder) closeUpstream() {
	if f.up != nil {
		f.s.p.untrack(f.up.Conn)
		f.up, f.upr = nil, nil
	}
}

// bodyBuffer is the size of the buffers a forwarded response goes through:
// a body without a length (chunked, or ended by the server's close)
// crosses them, so 4 KiB ones would cost two system calls each 4 KiB. A
// body with a Content-Length crosses them only for what was read with
// the header; the rest is spliced (writeSized).
const bodyBuffer = 256 << 10

// forward checks and forwards one absolute-URI request and copies the
// response back; it reports whether the client connection may carry
// another request.
func (f *forwarder) forward(req *http.Request) bool {
	s, p := f.s, f.s.p
	keep := !req.Close
	// answer writes the proxy's own answer to a request it does not
	// forward, keeping the connection if the request's body can be read
	// away.
	answer := func(err error) bool {
		keep = keep && drain(req)
		return writeError(s.client, err, !keep) == nil && keep
	}
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		msg := "toolhost: the proxy takes absolute http:// URIs (GET http://host/path); use CONNECT for https"
		if req.URL.Host == "" {
			msg = "toolhost: the proxy needs an absolute URI (GET http://host/path), not " + strconv.Quote(req.RequestURI)
		}
		writeAnswer(s.client, http.StatusBadRequest, "", msg, true)
		return false
	}
	host, port, err := splitHostPort(req.URL.Host, 80)
	if err != nil {
		writeAnswer(s.client, http.StatusBadRequest, "", "toolhost: bad host in the URI: "+err.Error(), true)
		return false
	}
	// Decide every request, even one that could reuse the upstream
	// connection: the allow-list (and any ask) is about each request's
	// host.
	d, err := s.decide(host, port)
	if err != nil {
		if errors.Is(err, ErrNotAllowed) {
			p.logRefusal("http", err)
		}
		return answer(err)
	}
	k := hostPort{d.host.String(), port}
	// Measured from now: the decision may have waited on an ask.
	ctx, cancel := s.opContext()
	defer cancel()
	if err := f.connect(ctx, d, k); err != nil {
		return answer(err)
	}

	removeHopHeaders(req.Header)
	// The Host header is the URI's, which was checked: a different Host
	// would reach another site behind the same address.
	req.Host = req.URL.Host
	req.RequestURI = ""
	if req.Header.Get("Expect") != "" {
		// Answer 100 Continue here, so that the client sends its body.
		req.Header.Del("Expect")
		if _, err := io.WriteString(s.client, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return false
		}
	}
	ubw := bufio.NewWriter(f.up)
	err = req.Write(ubw)
	if err == nil {
		err = ubw.Flush()
	}
	if err != nil {
		f.closeUpstream()
		writeError(s.client, &UpstreamError{Host: k.host, Port: port, Op: "send the request to", Err: err}, true)
		return false
	}
	resp := f.readResponse(req, k)
	if resp == nil {
		return false
	}
	// resp.Body is not closed here, as Close would read the rest of the
	// body from f.upr: resp.Write closes it, writeSized moves the body
	// without it, and on an error the upstream connection is closed.
	if resp.StatusCode == http.StatusSwitchingProtocols {
		f.closeUpstream()
		writeError(s.client, &UpstreamError{Host: k.host, Port: port, Op: "forward", Err: errors.New("the server switched protocols, which the proxy does not relay; use CONNECT")}, true)
		return false
	}
	removeHopHeaders(resp.Header)
	upClose := resp.Close
	if resp.ContentLength < 0 && len(resp.TransferEncoding) == 0 && bodyAllowed(req, resp) {
		// The body ends when the server closes: so must the client's.
		resp.Close = true
	}
	if !keep {
		resp.Close = true
	}
	if resp.ContentLength > 0 && bodyAllowed(req, resp) {
		err = f.writeSized(resp)
	} else {
		err = resp.Write(f.bw)
		if err == nil {
			err = f.bw.Flush()
		}
	}
	if err != nil {
		f.closeUpstream()
		return false
	}
	if upClose || resp.Close {
		f.closeUpstream()
	}
	return !resp.Close
}

// connect makes the upstream connection to k, the host and port d
// allowed, unless the one f holds goes there already (closing one to
// elsewhere). A dial or track error is logged (unless the proxy is
// closing) and returned, for the caller to answer with.
func (f *forwarder) connect(ctx context.Context, d decision, k hostPort) error {
	s, p := f.s, f.s.p
	if f.up != nil && f.key == k {
		return nil
	}
	f.closeUpstream()
	up, at, err := p.dial(ctx, d)
	if err == nil {
		err = p.track(up)
	}
	if err != nil {
		if !p.isClosed() {
			p.log.Info("netproxy: upstream error", "protocol", "http", "host", k.host, "port", k.port, "error", err.Error())
		}
		return err
	}
	p.log.Debug("netproxy: connected", "protocol", "http", "host", k.host, "port", k.port, "addr", at.String())
	f.up, f.key = s.wrap(up, p.countAllowed(d)), k
	f.upr = bufio.NewReaderSize(f.up, bodyBuffer)
	return nil
}

// readResponse reads the upstream's response to req, sent to k, past any
// interim answer. If it cannot, it closes the upstream connection,
// answers the client with why (a gateway timeout, or an upstream error)
// and returns nil: the client connection is to be closed.
func (f *forwarder) readResponse(req *http.Request, k hostPort) *http.Response {
	for {
		resp, err := http.ReadResponse(f.upr, req)
		if err != nil {
			f.closeUpstream()
			if isTimeout(err) {
				writeAnswer(f.s.client, http.StatusGatewayTimeout, NetworkErrorHeader, fmt.Sprintf("toolhost: network error (not a policy refusal): %s did not answer within the timeout", net.JoinHostPort(k.host, strconv.Itoa(k.port))), true)
				return nil
			}
			writeError(f.s.client, &UpstreamError{Host: k.host, Port: k.port, Op: "read the response of", Err: err}, true)
			return nil
		}
		// Interim answers (100 Continue, 103 Early Hints) are dropped:
		// the proxy answered 100 Continue itself.
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		return resp
	}
}

// writeSized writes resp, whose body is resp.ContentLength bytes, to the
// client: its head, then what f.upr read of the body with the head, then
// the rest from the upstream connection to the client's with copyFrom,
// spliced, past resp.Body and f.upr.
func (f *forwarder) writeSized(resp *http.Response) error {
	if err := writeHead(f.bw, resp); err != nil {
		return err
	}
	held := int(min(int64(f.upr.Buffered()), resp.ContentLength))
	b, _ := f.upr.Peek(held) // held bytes are buffered: no read
	f.bw.Write(b)            // an error stays in f.bw for Flush
	f.upr.Discard(held)
	if err := f.bw.Flush(); err != nil {
		return err
	}
	return f.s.client.copyFrom(f.up, resp.ContentLength-int64(held))
}

// respHeadExcluded are the headers writeHead writes itself, as
// Response.Write does.
var respHeadExcluded = map[string]bool{"Content-Length": true, "Transfer-Encoding": true, "Trailer": true}

// writeHead writes the head of resp, a response with a Content-Length, to
// w as resp.Write would write it: the status line, Connection: close if
// resp.Close, the Content-Length, the other headers and the blank line.
func writeHead(w io.Writer, resp *http.Response) error {
	text := strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode)+" ")
	if text == "" {
		text = http.StatusText(resp.StatusCode)
	}
	if text == "" {
		text = "status code " + strconv.Itoa(resp.StatusCode)
	}
	if _, err := fmt.Fprintf(w, "HTTP/%d.%d %03d %s\r\n", resp.ProtoMajor, resp.ProtoMinor, resp.StatusCode, text); err != nil {
		return err
	}
	if resp.Close {
		if _, err := io.WriteString(w, "Connection: close\r\n"); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(w, "Content-Length: %d\r\n", resp.ContentLength); err != nil {
		return err
	}
	if err := resp.Header.WriteSubset(w, respHeadExcluded); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\r\n")
	return err
}

// bodyAllowed reports whether resp to req may have a body.
func bodyAllowed(req *http.Request, resp *http.Response) bool {
	return req.Method != http.MethodHead && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified
}

// removeHopHeaders removes the hop-by-hop headers of h: those of
// hopHeaders, those Connection names, and every Proxy-* header.
func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	for k := range h {
		if strings.HasPrefix(k, "Proxy-") {
			delete(h, k)
		}
	}
}

// drain reads away a refused request's body, so that the connection can
// carry the next; it reports whether it could (false beyond
// maxDrainBytes).
func drain(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody {
		return true
	}
	n, err := io.Copy(io.Discard, io.LimitReader(req.Body, maxDrainBytes+1))
	return err == nil && n <= maxDrainBytes
}

// splitHostPort splits host[:port] (IPv6 in brackets), with def as the
// port when none is given.
func splitHostPort(hp string, def int) (string, int, error) {
	host, ps, err := net.SplitHostPort(hp)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) && ae.Err == "missing port in address" {
			return strings.TrimSuffix(strings.TrimPrefix(hp, "["), "]"), def, nil
		}
		return "", 0, err
	}
	if ps == "" {
		return host, def, nil
	}
	port, err := parsePort(ps)
	if err != nil {
		return "", 0, err
	}
	return host, port, nil
}

// writeError answers err: 403 for a refusal, 503 over the limit, 504 for
// a network fault that is a timeout, 502 for any other.
func writeError(w io.Writer, err error, closing bool) error {
	switch {
	case errors.Is(err, ErrNotAllowed):
		return writeAnswer(w, http.StatusForbidden, RefusalHeader, err.Error(), closing)
	case errors.Is(err, ErrOverLimit):
		return writeAnswer(w, http.StatusServiceUnavailable, RefusalHeader, err.Error(), closing)
	case errors.Is(err, ErrClosed):
		return writeAnswer(w, http.StatusServiceUnavailable, NetworkErrorHeader, "toolhost: the proxy is closing", true)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return writeAnswer(w, http.StatusGatewayTimeout, NetworkErrorHeader, err.Error(), closing)
	default:
		return writeAnswer(w, http.StatusBadGateway, NetworkErrorHeader, err.Error(), closing)
	}
}

// writeAnswer writes the proxy's own response: msg as the plain-text body
// and, if header is set, as that header's value too.
func writeAnswer(w io.Writer, code int, header, msg string, closing bool) error {
	msg = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, msg)
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", code, http.StatusText(code))
	if header != "" {
		fmt.Fprintf(&b, "%s: %s\r\n", header, msg)
	}
	fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n", len(msg)+1)
	if closing {
		b.WriteString("Connection: close\r\n")
	}
	b.WriteString("\r\n" + msg + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// refuseHTTPOverLimit reads a request beyond MaxConns and answers 503.
func (p *Proxy) refuseHTTPOverLimit(c net.Conn, br *bufio.Reader) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	host, port, _ := splitHostPort(req.URL.Host, 80)
	p.log.Warn("netproxy: connection refused", "protocol", "http", "host", host, "port", port, "reason", "too many connections", "limit", p.cfg.MaxConns)
	writeError(c, p.overLimitError(), true)
}
