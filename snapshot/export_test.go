package snapshot

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readTar lists a tar: name (without a directory's trailing slash) to
// entry.
func readTar(t *testing.T, r io.Reader) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		must(t, err)
		mode := fs.FileMode(h.Mode & 0o777)
		if h.Mode&0o4000 != 0 {
			mode |= fs.ModeSetuid
		}
		if h.Mode&0o2000 != 0 {
			mode |= fs.ModeSetgid
		}
		if h.Mode&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
		name := strings.TrimSuffix(h.Name, "/")
		switch h.Typeflag {
		case tar.TypeDir:
			out[name] = entry{Type: "dir", Mode: mode}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			must(t, err)
			out[name] = entry{Type: "file", Mode: mode, Content: string(b)}
		case tar.TypeSymlink:
			out[name] = entry{Type: "link", Target: h.Linkname}
		default:
			t.Fatalf("tar entry %q of type %c", h.Name, h.Typeflag)
		}
	}
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}

func TestExportListing(t *testing.T) {
	fx := newFixture(t, Options{})
	writeTree(t, fx.root, map[string]entry{
		"bin/run.sh":               file("#!/bin/sh\necho hi\n", 0o755),
		"secret":                   file("s\n", 0o600),
		"setuid":                   file("u\n", 0o4755),
		"ro":                       dir(0o555),
		"ro/inside":                file("i\n", 0o444),
		"empty":                    dir(0o700),
		"日本/名前 with space":         file("unicode\n", 0o644),
		"new\nline":                file("newline in the name\n", 0o644),
		"bin.dat":                  file("\x00\x01\x02\xff", 0o644),
		"link-rel":                 link("bin/run.sh"),
		"link-abs":                 link("/etc/hostname"),
		"dangling":                 link("../nowhere"),
		strings.Repeat("long", 40): file("a long name\n", 0o644),
	})
	want := listing(t, fx.root)
	info := fx.take(TakeOptions{})
	var buf bytes.Buffer
	must(t, fx.store.Export(fx.ctx, info.ID, &buf, ExportOptions{}))
	if diff := cmp.Diff(want, readTar(t, &buf)); diff != "" {
		t.Fatalf("export listing: mismatch (-want +got):\n%s", diff)
	}
}
