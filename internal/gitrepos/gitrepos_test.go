package gitrepos

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// tree makes the files and directories of spec under a new directory: a
// key ending in "/" is a directory, "-> T" a symlink to T, else a file
// with the value as its content.
func tree(t *testing.T, spec map[string]string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range spec {
		p := filepath.Join(root, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(k, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasPrefix(v, "-> "):
			err = os.Symlink(strings.TrimPrefix(v, "-> "), p)
		default:
			err = os.WriteFile(p, []byte(v), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestScanFindsEveryKindOfRepository(t *testing.T) {
	root := tree(t, map[string]string{
		".git/hooks/":                   "",
		".git/modules/sub/hooks/":       "",
		".git/inner/.git/":              "", // inside a .git: never looked at
		"a/.git/":                       "",
		"a/b/c/.git/":                   "",
		"sub/.git":                      "gitdir: ../.git/modules/sub\n",
		"wt/.git":                       "gitdir: /elsewhere/main/.git/worktrees/wt\r\n",
		"bad/.git":                      "not a pointer",
		"link/.git":                     "-> ../a/.git",
		"alias":                         "-> a", // a symlink to a directory: not followed
		"bare.git/HEAD":                 "ref: refs/heads/main\n",
		"bare.git/objects/":             "",
		"bare.git/refs/":                "",
		"bare.git/nested/.git/":         "", // a bare-looking directory hides nothing
		"notbare/HEAD/":                 "", // HEAD a directory: not a repository
		"notbare/objects/":              "",
		"notbare/refs/":                 "",
		"deep/1/2/3/4/5/6/7/8/9/.git/":  "",
		"plain/dir/with/files/file.txt": "x",
	})
	// A worktree whose git directory has a commondir.
	wtGit := filepath.Join(root, "main/.git/worktrees/w2")
	if err := os.MkdirAll(wtGit, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wtGit, "commondir"), []byte("../..\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "w2/.git"), nil, 0o644); err == nil {
		t.Fatal("w2 should not exist yet")
	}
	if err := os.MkdirAll(filepath.Join(root, "w2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "w2/.git"), []byte("gitdir: "+wtGit+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	res, err := Scan(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Repo{
		{Dir: ".", Kind: KindDir, GitDirs: []string{root + "/.git"}},
		{Dir: "a", Kind: KindDir, GitDirs: []string{root + "/a/.git"}},
		{Dir: "a/b/c", Kind: KindDir, GitDirs: []string{root + "/a/b/c/.git"}},
		{Dir: "bad", Kind: KindFile},
		{Dir: "bare.git", Kind: KindBare, GitDirs: []string{root + "/bare.git"}},
		{Dir: "bare.git/nested", Kind: KindDir, GitDirs: []string{root + "/bare.git/nested/.git"}},
		{Dir: "deep/1/2/3/4/5/6/7/8/9", Kind: KindDir, GitDirs: []string{root + "/deep/1/2/3/4/5/6/7/8/9/.git"}},
		{Dir: "link", Kind: KindLink, GitDirs: []string{root + "/link/.git"}},
		{Dir: "main", Kind: KindDir, GitDirs: []string{root + "/main/.git"}},
		{Dir: "sub", Kind: KindFile, GitDirs: []string{root + "/.git/modules/sub"}},
		{Dir: "w2", Kind: KindFile, GitDirs: []string{wtGit, root + "/main/.git"}},
		{Dir: "wt", Kind: KindFile, GitDirs: []string{"/elsewhere/main/.git/worktrees/wt"}},
	}
	if diff := cmp.Diff(want, res.Repos); diff != "" {
		t.Errorf("repositories mismatch (-want +got):\n%s", diff)
	}
	if res.Truncated != "" || res.Unreadable != 0 {
		t.Errorf("truncated %q, unreadable %d; want neither", res.Truncated, res.Unreadable)
	}
}

func TestScanDoesNotBlockOnAFifo(t *testing.T) {
	root := tree(t, map[string]string{"f/": ""})
	if err := mkfifo(filepath.Join(root, "f/.git")); err != nil {
		t.Skip("no fifo:", err)
	}
	res, err := Scan(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Repo{{Dir: "f", Kind: KindFile}}, res.Repos); diff != "" {
		t.Errorf("repositories mismatch (-want +got):\n%s", diff)
	}
}

func TestScanLimits(t *testing.T) {
	spec := map[string]string{}
	for i := range 50 {
		spec[fmt.Sprintf("d%02d/.git/", i)] = ""
		spec[fmt.Sprintf("d%02d/x/y/", i)] = ""
	}
	root := tree(t, spec)
	for _, tt := range []struct {
		name string
		opt  Options
		want string
	}{
		{"none reached", Options{}, ""},
		{"directories", Options{MaxDirs: 20}, LimitDirs},
		{"repositories", Options{MaxRepos: 10}, LimitRepos},
		{"time", Options{Timeout: time.Nanosecond}, LimitTime},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := openFDs(t)
			res, err := Scan(root, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			if res.Truncated != tt.want {
				t.Errorf("Truncated = %q, want %q", res.Truncated, tt.want)
			}
			switch tt.want {
			case "":
				if len(res.Repos) != 50 || res.Dirs != 151 {
					t.Errorf("found %d repositories in %d directories, want 50 in 151", len(res.Repos), res.Dirs)
				}
			case LimitDirs:
				if res.Dirs != 20 {
					t.Errorf("read %d directories, want 20", res.Dirs)
				}
			case LimitRepos:
				if len(res.Repos) != 10 {
					t.Errorf("found %d repositories, want 10", len(res.Repos))
				}
			}
			if after := openFDs(t); after != before {
				t.Errorf("%d descriptors open after the scan, %d before", after, before)
			}
		})
	}
}

func TestScanBreadthFirst(t *testing.T) {
	// Cut short, a scan has found the shallow repositories first.
	spec := map[string]string{"top/.git/": ""}
	for i := range 30 {
		spec[fmt.Sprintf("a/%02d/b/c/d/", i)] = ""
	}
	root := tree(t, spec)
	res, err := Scan(root, Options{MaxDirs: 5, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Repos) != 1 || res.Repos[0].Dir != "top" {
		t.Errorf("repositories %+v, want top's", res.Repos)
	}
}

func TestScanUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every directory")
	}
	root := tree(t, map[string]string{"locked/inner/.git/": ""})
	if err := os.Chmod(filepath.Join(root, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(root, "locked"), 0o755) })
	res, err := Scan(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Unreadable != 1 || len(res.Repos) != 0 {
		t.Errorf("unreadable %d, repositories %+v; want 1 and none", res.Unreadable, res.Repos)
	}
}

func TestScanMissingRoot(t *testing.T) {
	if _, err := Scan(filepath.Join(t.TempDir(), "nope"), Options{}); err == nil {
		t.Error("a missing root was scanned")
	}
}

func TestWritten(t *testing.T) {
	root := tree(t, map[string]string{
		".git/hooks/pre-commit.sample": "#!/bin/sh\n",
		".git/hooks/old":               "#!/bin/sh\n",
		".git/config":                  "[core]\n",
	})
	gitDir := root + "/.git"
	names := []string{"hooks", "config", "missing"}
	if got := Written(gitDir, names, time.Now().Add(time.Hour)); len(got) != 0 {
		t.Errorf("Written with since in the future = %q, want nothing", got)
	}
	got := Written(gitDir, names, time.Now().Add(-time.Hour))
	want := []string{gitDir + "/hooks/old", gitDir + "/config"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Written mismatch (-want +got):\n%s", diff)
	}
	// A symlink planted as the hooks directory is itself what was written.
	link := tree(t, map[string]string{".git/hooks": "-> /tmp"})
	got = Written(link+"/.git", names, time.Now().Add(-time.Hour))
	if diff := cmp.Diff([]string{link + "/.git/hooks"}, got); diff != "" {
		t.Errorf("Written of a hooks symlink mismatch (-want +got):\n%s", diff)
	}
}

// openFDs counts this process's open descriptors (Linux), or 0.
func openFDs(t *testing.T) int {
	if runtime.GOOS != "linux" {
		return 0
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
