//go:build !linux

package workspace

import "os"

// pathMax is the conservative PATH_MAX of the BSDs and macOS.
const pathMax = 1024

// fdPath reports false: without /proc the resolved name is used instead.
func fdPath(*os.File) (string, bool) { return "", false }
