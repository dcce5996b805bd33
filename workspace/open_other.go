//go:build !unix

package workspace

import "os"

// openReadFlags is a plain read-only open where O_NONBLOCK does not exist.
const openReadFlags = os.O_RDONLY
