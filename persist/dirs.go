package persist

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Dirs are where persisted sessions live.
type Dirs struct {
	// State holds the journals and the holders' logs.
	State string
	// Run holds the holders' sockets and lock files.
	Run string
}

// errDirRefused is the error of a state or runtime directory with another
// owner or a mode that lets others in.
var errDirRefused = errors.New("directory refused")

// ResolveDirs returns the directories for state, the --state-dir flag
// ("" for the default), creating them 0700 where missing, and checks that
// each is this user's and closed to others.
func ResolveDirs(state string) (Dirs, error) {
	if state == "" {
		switch {
		case os.Getenv("XDG_STATE_HOME") != "":
			state = filepath.Join(os.Getenv("XDG_STATE_HOME"), "toolhost")
		default:
			home, err := os.UserHomeDir()
			if err != nil {
				return Dirs{}, fmt.Errorf("no state directory: give --state-dir, or set XDG_STATE_HOME or HOME: %w", err)
			}
			state = filepath.Join(home, ".local", "state", "toolhost")
		}
	}
	state, err := filepath.Abs(state)
	if err != nil {
		return Dirs{}, err
	}
	run := filepath.Join(state, "run")
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		run = filepath.Join(x, "toolhost")
	}
	d := Dirs{State: state, Run: run}
	for _, dir := range []string{d.State, filepath.Join(d.State, "sessions"), d.Run} {
		if err := ownDir(dir); err != nil {
			return Dirs{}, err
		}
	}
	return d, nil
}

// ownDir creates dir 0700 if missing and checks it: a directory, not a
// symlink, owned by this user, with no access for group or others.
func ownDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot create %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory: %w", dir, errDirRefused)
	}
	uid, ok := ownerOf(fi)
	if ok && uid != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not this user (uid %d): %w", dir, uid, os.Geteuid(), errDirRefused)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s has mode %v; it must be 0700, closed to others: %w", dir, fi.Mode().Perm(), errDirRefused)
	}
	return nil
}

// holderKey names the holder of root for this build: a hash of both, so
// that two builds never share a holder (a holder serves with its own
// code).
func holderKey(root, build string) string {
	h := sha256.Sum256([]byte(root + "\x00" + build))
	return hex.EncodeToString(h[:12])
}

// socketPath, lockPath and logPath are the holder's files.
func (d Dirs) socketPath(key string) string { return filepath.Join(d.Run, "h-"+key+".sock") }
func (d Dirs) lockPath(key string) string   { return filepath.Join(d.Run, "h-"+key+".lock") }
func (d Dirs) logPath(key string) string    { return filepath.Join(d.State, "holder-"+key+".log") }

// journalPath is a session's journal.
func (d Dirs) journalPath(id string) string {
	return filepath.Join(d.State, "sessions", id+".journal")
}
