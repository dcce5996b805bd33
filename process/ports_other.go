//go:build !linux

package process

// listeners is Linux only here: no ports are reported elsewhere.
func listeners([]int) []listening { return nil }

// hostNetNS is "": there are no network namespaces here.
func hostNetNS() string { return "" }

// listenFingerprint says nothing here: every scan is a whole one.
func listenFingerprint(string) (uint64, bool) { return 0, false }

// netnsOf is "": there are no network namespaces here.
func netnsOf(int) string { return "" }
