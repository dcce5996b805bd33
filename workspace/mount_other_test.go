//go:build !linux

package workspace

import "errors"

// bindMount reports that this system has no bind mounts.
func bindMount(src, dst string) error { return errors.New("no bind mounts on this system") }

// unmount does nothing.
func unmount(string) {}
