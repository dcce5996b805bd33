//go:build !linux

package process

// listeners is Linux only here: no ports are reported elsewhere.
func listeners([]int, *listenReader) []listening { return nil }

// listenReader reads nothing here.
type listenReader struct{}

// fingerprint says nothing here: every scan is a whole one.
func (*listenReader) fingerprint(string, int) (uint64, bool) { return 0, false }

// close does nothing here.
func (*listenReader) close() {}

// hostNetNS is "": there are no network namespaces here.
func hostNetNS() string { return "" }

// netnsOf is "": there are no network namespaces here.
func netnsOf(int) string { return "" }
