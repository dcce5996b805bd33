package netproxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
)

// SOCKS5 (RFC 1928) constants.
const (
	socks5Version = 0x05
	socks4Version = 0x04

	socksNoAuth       = 0x00
	socksNoAcceptable = 0xff

	socksCmdConnect = 0x01

	socksAtypIPv4   = 0x01
	socksAtypDomain = 0x03
	socksAtypIPv6   = 0x04

	socksSucceeded        = 0x00
	socksGeneralFailure   = 0x01
	socksNotAllowed       = 0x02
	socksNetUnreachable   = 0x03
	socksHostUnreachable  = 0x04
	socksConnRefused      = 0x05
	socksCmdNotSupported  = 0x07
	socksAtypNotSupported = 0x08
)

// errSOCKS is a malformed or unsupported SOCKS5 request, with the reply
// code it gets.
type errSOCKS struct {
	code byte
	msg  string
}

func (e *errSOCKS) Error() string { return "socks5: " + e.msg }

// serveSOCKS serves one SOCKS5 client: no authentication, CONNECT only.
func (p *Proxy) serveSOCKS(s *session) {
	if !socksGreet(s.client, s.br) {
		return
	}
	host, port, err := readSOCKSRequest(s.br)
	if err != nil {
		var se *errSOCKS
		if errors.As(err, &se) {
			writeSOCKSReply(s.client, se.code)
			p.log.Info("netproxy: bad SOCKS5 request", "error", err.Error())
		}
		return
	}
	s.unboundedHeader()
	up, counts, err := s.connect("socks5", host, port)
	if err != nil {
		writeSOCKSReply(s.client, socksCode(err))
		return
	}
	defer p.untrack(up)
	// The bound address is left zero: the proxy's address outside the
	// namespace is none of the command's business.
	if err := writeSOCKSReply(s.client, socksSucceeded); err != nil {
		return
	}
	s.tunnel(up, counts, s.buffered())
}

// socksGreet reads the client's methods and answers: "no authentication"
// if it offers it, else "no acceptable method"; it reports whether the
// request may follow.
func socksGreet(w io.Writer, br *bufio.Reader) bool {
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return false
	}
	methods := make([]byte, h[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return false
	}
	for _, m := range methods {
		if m == socksNoAuth {
			_, err := w.Write([]byte{socks5Version, socksNoAuth})
			return err == nil
		}
	}
	w.Write([]byte{socks5Version, socksNoAcceptable})
	return false
}

// readSOCKSRequest reads a request and returns the host (a name, or an
// address's text) and port of a CONNECT. Anything else is an *errSOCKS
// with the reply it gets: 0x01 for a bad version, 0x07 for BIND and UDP
// ASSOCIATE, 0x08 for an unknown address type.
func readSOCKSRequest(br *bufio.Reader) (string, int, error) {
	var h [4]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return "", 0, err
	}
	if h[0] != socks5Version {
		return "", 0, &errSOCKS{socksGeneralFailure, fmt.Sprintf("request version %d, not 5", h[0])}
	}
	if h[1] != socksCmdConnect {
		return "", 0, &errSOCKS{socksCmdNotSupported, fmt.Sprintf("command %d is not supported: only CONNECT (1); BIND and UDP ASSOCIATE are refused", h[1])}
	}
	var host string
	switch h[3] {
	case socksAtypIPv4:
		var a [4]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return "", 0, err
		}
		host = netip.AddrFrom4(a).String()
	case socksAtypIPv6:
		var a [16]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return "", 0, err
		}
		host = netip.AddrFrom16(a).String()
	case socksAtypDomain:
		n, err := br.ReadByte()
		if err != nil {
			return "", 0, err
		}
		name := make([]byte, n)
		if _, err := io.ReadFull(br, name); err != nil {
			return "", 0, err
		}
		host = string(name)
	default:
		return "", 0, &errSOCKS{socksAtypNotSupported, fmt.Sprintf("address type %d is not supported", h[3])}
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return "", 0, err
	}
	return host, int(binary.BigEndian.Uint16(pb[:])), nil
}

// writeSOCKSReply writes a reply with code and a zero bound address
// (0.0.0.0:0).
func writeSOCKSReply(w io.Writer, code byte) error {
	_, err := w.Write([]byte{socks5Version, code, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}

// refuseSOCKSOverLimit reads a request beyond MaxConns and answers 0x01.
func (p *Proxy) refuseSOCKSOverLimit(c net.Conn, br *bufio.Reader) {
	if !socksGreet(c, br) {
		return
	}
	host, port, err := readSOCKSRequest(br)
	if err != nil {
		return
	}
	p.log.Warn("netproxy: connection refused", "protocol", "socks5", "host", host, "port", port, "reason", "too many connections", "limit", p.cfg.MaxConns)
	writeSOCKSReply(c, socksCode(p.overLimitError()))
}
