//go:build !linux

package gitrepos

// watcher is Linux's inotify instance; elsewhere there is none.
type watcher struct{}

// close does nothing.
func (*watcher) close() {}
