//go:build !linux

package sandbox

import "net"

// ProxyListener returns nil: off Linux no network namespace is made, so
// Policy.Proxy always falls back to the network off, which is not enforced
// either (the Report says so).
func (s *Sandbox) ProxyListener() net.Listener { return nil }
