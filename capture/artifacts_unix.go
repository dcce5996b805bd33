//go:build unix

package capture

import "syscall"

// oNoFollow makes opening an artifact file fail if its last component is a
// symlink.
const oNoFollow = syscall.O_NOFOLLOW
