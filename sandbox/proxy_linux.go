//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// listenProxy makes the proxy's listener on 127.0.0.1, port chosen by the
// kernel, and appends ProxyEnv's variables for its address to cmd's
// environment. It runs on the confining thread once that thread has its
// network namespace and before Landlock and seccomp: a socket belongs to
// the network namespace of the thread that creates it, and the goroutine
// is locked to that thread, so socket() runs there. The server serves the
// listener from any thread; the child never inherits it (close-on-exec).
//
// The listener's congestion control is loopbackCongestion, which the
// connections it accepts inherit: see there.
func (st *sysState) listenProxy(cmd *exec.Cmd) (uint16, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { setLoopbackCongestion(int(fd)) })
	}}
	l, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("network proxy: listen in the namespace: %w", err)
	}
	st.proxy = l
	addr := l.Addr().(*net.TCPAddr).AddrPort()
	if st.proxyEnv != nil {
		cmd.Env = append(cmd.Environ(), st.proxyEnv(addr)...)
	}
	return addr.Port(), nil
}

// loopbackCongestion lists the congestion controls the proxy's listener
// asks for, in order, for the connections it accepts: the proxy's side of
// every connection a command makes to it, which never leaves the
// namespace's loopback and carries every byte a download brings in. A
// machine's default may be BBR, which paces what it sends by a timer; on
// a loopback leg that pacing is pure cost: a curl download through the
// proxy is markedly slower with BBR than with cubic or reno. The upstream
// connections the proxy dials keep the machine's default: they cross the
// real network.
// Reno is built into every kernel; cubic nearly always is.
var loopbackCongestion = []string{"cubic", "reno"}

// setLoopbackCongestion sets the first of loopbackCongestion the kernel
// takes on the socket fd. It is an optimisation: if none is taken, the
// socket keeps the default, and nothing else changes.
func setLoopbackCongestion(fd int) {
	for _, cc := range loopbackCongestion {
		if unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc) == nil {
			return
		}
	}
}

// closeProxy closes the proxy's listener, if any; closing it again, after
// the caller's proxy did, is harmless.
func (st *sysState) closeProxy() {
	if st.proxy != nil {
		_ = st.proxy.Close()
	}
}

// ProxyListener returns the listener Start made on the loopback of the
// command's network namespace under Policy.Proxy, nil when there is none
// (Report.Proxy false). The caller serves it (netproxy) and closes it
// when the command has ended; Finish closes it too. Connections it
// accepts come from inside the namespace; whatever the server dials for
// them leaves from the server's own namespace.
func (s *Sandbox) ProxyListener() net.Listener { return s.sys.proxy }

// landlockNetPortAttr is struct landlock_net_port_attr (Landlock ABI 4),
// which x/sys does not define.
type landlockNetPortAttr struct {
	allowedAccess uint64
	port          uint64
}

// landlockRuleNetPort is LANDLOCK_RULE_NET_PORT.
const landlockRuleNetPort = 2

// allowProxyConnect lets the command connect to the proxy's port where
// Landlock handles TCP under the proxy (no other layer puts the command in
// a Landlock domain). Landlock's rules name ports, not addresses; in the
// namespace only its own loopback exists.
func allowProxyConnect(ruleset int, port uint16) error {
	rule := landlockNetPortAttr{allowedAccess: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), landlockRuleNetPort,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock_add_rule: the proxy's port %d: %w", port, e)
	}
	return nil
}
