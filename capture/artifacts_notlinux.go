//go:build !linux

package capture

// renameNoReplace renames oldpath to newpath, failing if newpath exists.
func renameNoReplace(oldpath, newpath string) error {
	return renameChecked(oldpath, newpath)
}
