package gitrepos

import (
	"os"
	"strings"
	"time"
)

// maxListed is the most entries of one protected directory Written looks
// at.
const maxListed = 10_000

// Written returns what was changed in gitDir since the time given: for
// each name, gitDir/name itself when it is a file or a symlink, or each
// entry of it when it is a directory (but git's own *.sample hooks, which
// git never runs). Changed means its change time (ctime, which a process
// cannot set; on systems other than Linux the modification time) is not
// before since: a file created, written, renamed into place or chmodded
// since. Paths are absolute; nothing is followed but the symlinks in
// gitDir itself.
func Written(gitDir string, names []string, since time.Time) []string {
	var out []string
	for _, name := range names {
		p := gitDir + "/" + name
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if !fi.IsDir() {
			if !changeTime(fi).Before(since) {
				out = append(out, p)
			}
			continue
		}
		f, err := openDir(p)
		if err != nil {
			continue
		}
		entries, _ := f.ReadDir(maxListed)
		f.Close()
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".sample") {
				continue
			}
			efi, err := e.Info()
			if err == nil && !changeTime(efi).Before(since) {
				out = append(out, p+"/"+e.Name())
			}
		}
	}
	return out
}
