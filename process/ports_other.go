//go:build !linux

package process

// listeners is Linux only here: no ports are reported elsewhere.
func listeners([]int) []listening { return nil }

// hostNetNS is "": there are no network namespaces here.
func hostNetNS() string { return "" }
