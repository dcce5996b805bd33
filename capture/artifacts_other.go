//go:build !unix

package capture

// oNoFollow is 0 where the platform has no O_NOFOLLOW; O_EXCL still refuses
// an existing name, symlinks included.
const oNoFollow = 0
