//go:build !linux

package gitrepos

import (
	"cmp"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// scan is Scan, as on Linux but with one worker and the portable
// directory reads of package os, and without a cache (c is not used): a
// directory swapped for a symlink between its listing and its open is
// followed here.
func scan(root string, opt Options, _ *Cache) (Result, error) {
	opt = opt.withDefaults()
	start := time.Now()
	root = filepath.Clean(root)
	if fi, err := os.Stat(root); err != nil {
		return Result{}, err
	} else if !fi.IsDir() {
		return Result{}, &os.PathError{Op: "open", Path: root, Err: fs.ErrInvalid}
	}
	var res Result
	queue := []string{"."}
	for len(queue) > 0 {
		if res.Dirs >= opt.MaxDirs {
			res.Truncated = LimitDirs
			break
		}
		if time.Since(start) > opt.Timeout {
			res.Truncated = LimitTime
			break
		}
		rel := queue[0]
		queue = queue[1:]
		res.Dirs++
		res.Listed++
		abs := root
		if rel != "." {
			abs = root + "/" + rel
		}
		entries, err := os.ReadDir(abs)
		if err != nil {
			if !os.IsNotExist(err) {
				res.Unreadable++
			}
			continue
		}
		var head, obj, refs bool
		var found []Repo
		for _, e := range entries {
			typ := e.Type()
			switch e.Name() {
			case ".git":
				found = append(found, gitRepoOther(rel, abs, typ))
				continue
			case "HEAD":
				head = !typ.IsDir()
			case "objects":
				obj = typ.IsDir()
			case "refs":
				refs = typ.IsDir()
			}
			if typ.IsDir() {
				if res.Dirs+len(queue) >= opt.MaxDirs {
					// It could never be read within MaxDirs.
					res.Truncated = LimitDirs
					continue
				}
				queue = append(queue, join(rel, e.Name()))
			}
		}
		if head && obj && refs {
			found = append(found, Repo{Dir: rel, Kind: KindBare, GitDirs: []string{abs}})
		}
		for _, r := range found {
			if len(res.Repos) >= opt.MaxRepos {
				res.Truncated = LimitRepos
				break
			}
			res.Repos = append(res.Repos, r)
		}
		if res.Truncated == LimitRepos {
			break
		}
	}
	slices.SortFunc(res.Repos, func(a, b Repo) int {
		return cmp.Or(strings.Compare(a.Dir, b.Dir), strings.Compare(string(a.Kind), string(b.Kind)))
	})
	res.Duration = time.Since(start)
	return res, nil
}

// gitRepoOther is the repository of rel (abs) whose .git has type typ.
func gitRepoOther(rel, abs string, typ fs.FileMode) Repo {
	gitDir := abs + "/.git"
	switch {
	case typ.IsDir():
		return Repo{Dir: rel, Kind: KindDir, GitDirs: []string{gitDir}}
	case typ&fs.ModeSymlink != 0:
		return Repo{Dir: rel, Kind: KindLink, GitDirs: []string{gitDir}}
	}
	r := Repo{Dir: rel, Kind: KindFile}
	if !typ.IsRegular() {
		return r
	}
	dir, ok := parseGitdir(readSmallOther(gitDir), abs)
	if !ok {
		return r
	}
	r.GitDirs = append(r.GitDirs, dir)
	if c, ok := parseCommondir(readSmallOther(dir+"/commondir"), dir); ok {
		r.GitDirs = append(r.GitDirs, c)
	}
	return r
}

// readSmallOther reads up to maxPointer bytes of the regular file p; nil
// if it cannot.
func readSmallOther(p string) []byte {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, maxPointer)
	n, _ := f.Read(b)
	if n <= 0 {
		return nil
	}
	return b[:n]
}
