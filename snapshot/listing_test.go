package snapshot

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestListable(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(d time.Duration) fileStat { return fileStat{ctime: start.Add(d).UnixNano()} }
	for _, c := range []struct {
		name string
		st   fileStat
		want bool
	}{
		{"changed after the scan began", at(time.Millisecond + 1), false},
		{"changed within the fine window", at(-50*time.Millisecond + 1), false},
		{"changed before the fine window", at(-150*time.Millisecond + 1), true},
		{"whole seconds, within the coarse window", at(-time.Second), false},
		{"whole seconds, before the coarse window", at(-3 * time.Second), true},
	} {
		if got := listable(c.st, start); got != c.want {
			t.Errorf("%s: listable = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestScanListings: a directory whose stat is the one a listing recorded
// is not listed again, and one whose stat changed is. The listing given
// here names fewer entries than the directory holds, so that its use shows.
func TestScanListings(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"a", "b", "sub/c"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stat := func(rel string) fileStat {
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return statOf(fi)
	}
	names := func(top *node) []string {
		var out []string
		var walk func(*node)
		walk = func(n *node) {
			for _, k := range n.kids {
				out = append(out, k.rel)
				walk(k)
			}
		}
		walk(top)
		return out
	}
	stale := dirListings{
		"":    newDirListing(stat("."), "", []string{"a", "sub"}),
		"sub": newDirListing(stat("sub"), "sub", []string{}),
	}
	top, next, err := scanRoot(context.Background(), r, &filter{}, 2, stale)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "sub"}, names(top)); diff != "" {
		t.Errorf("scan with listings whose stat is unchanged: mismatch (-want +got):\n%s", diff)
	}
	if next[""] != stale[""] || next["sub"] != stale["sub"] {
		t.Errorf("the listings used were not kept for the next scan: %v", next)
	}

	// A directory whose stat differs from the listing's in anything, here
	// its ctime (as after a chmod, or a new entry: see dirListing), is
	// listed again.
	for _, rel := range []string{"", "sub"} {
		changed := *stale[rel]
		changed.st.ctime--
		moved := maps.Clone(stale)
		moved[rel] = &changed
		top, next, err = scanRoot(context.Background(), r, &filter{}, 2, moved)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{"": {"a", "b", "sub"}, "sub": {"a", "sub", "sub/c"}}[rel]
		if diff := cmp.Diff(want, names(top)); diff != "" {
			t.Errorf("scan after %q's stat changed: mismatch (-want +got):\n%s", rel, diff)
		}
		// The directories were made just now, within the racy window of
		// the scan's start: what was listed is not kept.
		if l, ok := next[rel]; ok {
			t.Errorf("a listing of %q, changed within the racy window, was kept: %+v", rel, l)
		}
	}
}
