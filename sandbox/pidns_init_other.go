//go:build linux && !amd64 && !arm64

package sandbox

// initMachine and initCode: there is no init for this architecture, so
// no PID namespace (Probe says why).
const initMachine = 0

var initCode []byte
