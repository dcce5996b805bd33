package approval

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// alwaysGrant is an Always grant of root for target.
func alwaysGrant(root, target string) Grant {
	return Grant{ID: newID("g-"), Kind: Network, Target: target, Scope: Always, Root: root, CreatedAt: t0}
}

func TestStoreRoundTrip(t *testing.T) {
	s := openStore(t)
	if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenStore created the file: %v", err)
	}
	a, b := alwaysGrant("/r1", "a.example:443"), alwaysGrant("/r2", "b.example:443")
	c := Grant{ID: newID("g-"), Kind: Sandbox, Target: "network on", Scope: Always, Root: "/r1", CreatedAt: t0}
	for _, g := range []Grant{a, b, c} {
		if err := s.Add(g); err != nil {
			t.Fatal(err)
		}
	}
	// The same grant again, under another id: the first one stays.
	if err := s.Add(alwaysGrant("/r1", "a.example:443")); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(a); err == nil {
		t.Error("Add of a taken id succeeded")
	}

	s2, err := OpenStore(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Store{s, s2} {
		all, err := st.All()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Grant{a, b, c}, all); diff != "" {
			t.Errorf("All: mismatch (-want +got):\n%s", diff)
		}
		r1, err := st.Grants("/r1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Grant{a, c}, r1); diff != "" {
			t.Errorf("Grants(/r1): mismatch (-want +got):\n%s", diff)
		}
	}

	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(filepath.Dir(s.Path()))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", di.Mode().Perm())
	}
	data, err := os.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"version": 1`) {
		t.Errorf("the file has no version 1:\n%s", data)
	}

	if err := s.Remove(b.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(b.ID); !errors.Is(err, ErrUnknown) {
		t.Errorf("Remove of a removed id: %v, want ErrUnknown", err)
	}
	// s2 sees the remove, made by "another process".
	all, err := s2.All()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Grant{a, c}, all); diff != "" {
		t.Errorf("the other Store after a Remove: mismatch (-want +got):\n%s", diff)
	}
	// Removing the last grants leaves an empty, valid file.
	for _, id := range []string{a.ID, c.ID} {
		if err := s2.Remove(id); err != nil {
			t.Fatal(err)
		}
	}
	if all, err := s.All(); err != nil || len(all) != 0 {
		t.Errorf("All after removing every grant: %+v, %v", all, err)
	}
}

func TestStoreRefused(t *testing.T) {
	const good = `{"version":1,"grants":[{"id":"g-1","kind":"network","target":"a:443","root":"/r","createdAt":"2026-11-29T05:00:00Z"}]}`
	for _, tc := range []struct {
		name    string
		content string // "" for a directory
		mode    os.FileMode
		want    string
	}{
		{"damaged JSON", `{"version":1,"grants":[{"id":"g-1"`, 0o600, "is damaged"},
		{"not an object", `[1,2]`, 0o600, "is damaged"},
		{"no version", `{"grants":[]}`, 0o600, "no version"},
		{"version 2", `{"version":2,"grants":[{"id":"g-1","kind":"network","target":"a:443","root":"/r","createdAt":"2026-11-29T05:00:00Z","why":"new"}]}`, 0o600, "version 2; this toolhost reads version 1"},
		{"version as a string", `{"version":"1","grants":[]}`, 0o600, `version "1"`},
		{"an unknown field", `{"version":1,"grants":[],"extra":true}`, 0o600, "is damaged"},
		{"a bad kind", strings.Replace(good, `"network"`, `"file"`, 1), 0o600, `bad kind "file"`},
		{"no root", strings.Replace(good, `"/r"`, `""`, 1), 0o600, "no root"},
		{"a bad id", strings.Replace(good, `"g-1"`, `"x"`, 1), 0o600, `bad id "x"`},
		{"data after the end", good + `{}`, 0o600, "is damaged"},
		{"writable by others", good, 0o666, "lets others write it"},
		{"a directory", "", 0, "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "grants.json")
			if tc.content == "" {
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
			} else {
				writeFile(t, path, tc.content)
				if err := os.Chmod(path, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			_, err := OpenStore(path)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("OpenStore: %v, want ErrRefused naming the file and saying %q", err, tc.want)
			}
			if tc.content != "" {
				if got, _ := os.ReadFile(path); string(got) != tc.content {
					t.Errorf("the refused file changed: %q", got)
				}
			}
		})
	}
	// A good file is read.
	path := filepath.Join(t.TempDir(), "grants.json")
	writeFile(t, path, good)
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if gs, err := s.Grants("/r"); err != nil || len(gs) != 1 || gs[0].Scope != Always {
		t.Errorf("Grants of a good file: %+v, %v", gs, err)
	}
}

func TestStoreDamagedLaterIsNeverOverwritten(t *testing.T) {
	s := openStore(t)
	if err := s.Add(alwaysGrant("/r", "a.example:443")); err != nil {
		t.Fatal(err)
	}
	const damaged = `{"version":1,"grants":[{"id":"g-`
	writeFile(t, s.Path(), damaged)
	if _, err := s.Grants("/r"); !errors.Is(err, ErrRefused) {
		t.Errorf("Grants of a damaged file: %v, want ErrRefused", err)
	}
	for name, err := range map[string]error{
		"Add":    s.Add(alwaysGrant("/r", "b.example:443")),
		"Remove": s.Remove("g-1"),
	} {
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s on a damaged file: %v, want ErrRefused", name, err)
		}
	}
	if got, _ := os.ReadFile(s.Path()); string(got) != damaged {
		t.Errorf("the damaged file was overwritten: %q", got)
	}
}

func TestStoreConcurrentWritersLoseNothing(t *testing.T) {
	s1 := openStore(t)
	s2, err := OpenStore(s1.Path())
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup // the test owns the writers
		mu   sync.Mutex
		want = map[string]bool{}
	)
	for i := range 40 {
		st := []*Store{s1, s2}[i%2]
		wg.Go(func() {
			g := alwaysGrant("/r", fmt.Sprintf("h%d.example:443", i))
			if err := st.Add(g); err != nil {
				t.Error(err)
			}
			mu.Lock()
			want[g.ID] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	s3, err := OpenStore(s1.Path())
	if err != nil {
		t.Fatal(err)
	}
	all, err := s3.All()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, g := range all {
		got[g.ID] = true
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("grants: mismatch (-want +got):\n%s", diff)
	}
}

func TestStoreRefusesAnOpenDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "toolhost")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	s, err := OpenStore(filepath.Join(dir, "grants.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(alwaysGrant("/r", "a.example:443")); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "lets others write it") {
		t.Errorf("Add in a directory open to all: %v, want ErrRefused", err)
	}
}

func TestDefaultStorePath(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string // "" for an error
	}{
		{map[string]string{"XDG_CONFIG_HOME": "/x/config", "HOME": "/home/u"}, "/x/config/toolhost/grants.json"},
		{map[string]string{"HOME": "/home/u"}, "/home/u/.config/toolhost/grants.json"},
		{map[string]string{"XDG_CONFIG_HOME": "relative", "HOME": "/home/u"}, "/home/u/.config/toolhost/grants.json"},
		{map[string]string{}, ""},
		{map[string]string{"HOME": "relative"}, ""},
	} {
		got, err := DefaultStorePath(func(k string) string { return tc.env[k] })
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("DefaultStorePath(%v) = %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}
}
