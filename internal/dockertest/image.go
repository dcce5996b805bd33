package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	// ToolhostPath is where the image holds toolhost.
	ToolhostPath = "/usr/local/bin/toolhost"
	// Workspace is the image's directory for a far toolhost's root.
	Workspace = "/ws"
	// MarkerFile is a file only the image has, holding MarkerContent: a
	// command that prints it ran in a container of the image.
	MarkerFile = "/etc/toolhost-dockertest"
	// MarkerContent is what MarkerFile holds.
	MarkerContent = "inside a toolhost dockertest container\n"
	// busyboxPath is where the image holds busybox; its applets link to it.
	busyboxPath = "/bin/busybox"
)

// BuildToolhost builds the toolhost of package pkg (a directory or an
// import path) static, with CGO_ENABLED=0, into a temporary directory of
// the test, and returns its path. A build under -race needs cgo, so the
// binary a test binary built with -race cannot go into an image.
func BuildToolhost(t testing.TB, pkg string) string {
	t.Helper()
	t0 := time.Now()
	out := filepath.Join(t.TempDir(), "toolhost")
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building a static toolhost: %v\n%s", err, b)
	}
	t.Logf("dockertest: static toolhost built in %v", time.Since(t0).Round(time.Millisecond))
	return out
}

// Image builds an image holding the static binary toolhost at ToolhostPath
// and busybox (see the package's doc) with docker import of a tarball it
// writes, and returns its reference. On a system dockerd the test's
// cleanup removes it; a dockerd of the fixture's own goes with its data.
func (d *Daemon) Image(t testing.TB, toolhost string) string {
	t.Helper()
	t0 := time.Now()
	if err := checkStatic(toolhost); err != nil {
		t.Fatalf("dockertest: toolhost for the image: %v (BuildToolhost builds one with CGO_ENABLED=0)", err)
	}
	busybox, err := findBusybox()
	if err != nil {
		Unavailable(t, "%v", err)
	}
	list, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		t.Fatalf("dockertest: %s --list-full: %v", busybox, err)
	}
	tarball := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := writeRootfs(tarball, toolhost, busybox, strings.Fields(string(list))); err != nil {
		t.Fatalf("dockertest: writing the image's tarball: %v", err)
	}
	ref := "toolhost-dockertest:" + randomHex(6)
	d.Docker(t, "import", "--message", "toolhost dockertest image", tarball, ref)
	if !d.Own {
		t.Cleanup(func() {
			if out, err := d.run(context.Background(), commandLimit, "rmi", "--force", ref); err != nil {
				t.Errorf("dockertest: removing image %s: %v %s", ref, err, out)
			}
		})
	}
	t.Logf("dockertest: image %s built in %v", ref, time.Since(t0).Round(time.Millisecond))
	return ref
}

// checkStatic says why bin is no static ELF executable, if it is not.
func checkStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked", bin)
		}
	}
	return nil
}

// findBusybox returns a static busybox of this machine (Debian's
// busybox-static; its busybox package's is dynamic).
func findBusybox() (string, error) {
	var cands []string
	if p, err := exec.LookPath("busybox"); err == nil {
		cands = append(cands, p)
	}
	cands = append(cands, "/bin/busybox", "/usr/bin/busybox")
	var why []string
	for _, p := range cands {
		err := checkStatic(p)
		if err == nil {
			return p, nil
		}
		why = append(why, err.Error())
	}
	return "", fmt.Errorf("no static busybox (apt-get install busybox-static): %s", strings.Join(why, "; "))
}

// writeRootfs writes the image's file tree as a tar file: directories,
// toolhost, busybox and a symlink to it for each applet (paths relative to
// /, as `busybox --list-full` gives them), /etc/passwd and /etc/group for
// root, and MarkerFile.
func writeRootfs(out, toolhost, busybox string, applets []string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	mtime := time.Unix(0, 0)
	dirs := map[string]int64{"bin": 0o755, "dev": 0o755, "etc": 0o755, "proc": 0o555, "root": 0o700, "sys": 0o555,
		"tmp": 0o1777, "usr": 0o755, "usr/local": 0o755, "usr/local/bin": 0o755, strings.TrimPrefix(Workspace, "/"): 0o755}
	links := map[string]bool{}
	for _, a := range applets {
		a = strings.TrimPrefix(path.Clean("/"+a), "/")
		if a == strings.TrimPrefix(busyboxPath, "/") || a == "" {
			continue
		}
		links[a] = true
		for dir := path.Dir(a); dir != "."; dir = path.Dir(dir) {
			if _, ok := dirs[dir]; !ok {
				dirs[dir] = 0o755
			}
		}
	}
	var werr error
	write := func(h *tar.Header, body io.Reader) {
		if werr != nil {
			return
		}
		h.Uid, h.Gid, h.ModTime, h.Format = 0, 0, mtime, tar.FormatPAX
		if werr = tw.WriteHeader(h); werr == nil && body != nil {
			_, werr = io.Copy(tw, body)
		}
	}
	dirNames := make([]string, 0, len(dirs))
	for dir := range dirs {
		dirNames = append(dirNames, dir)
	}
	slices.Sort(dirNames) // a parent before its children
	for _, dir := range dirNames {
		write(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: dirs[dir]}, nil)
	}
	for _, file := range []struct{ src, dst string }{{busybox, busyboxPath}, {toolhost, ToolhostPath}} {
		src, err := os.Open(file.src)
		if err != nil {
			return errors.Join(err, f.Close())
		}
		fi, err := src.Stat()
		if err == nil {
			write(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(file.dst, "/"), Mode: 0o755, Size: fi.Size()}, src)
		}
		src.Close()
		if err != nil {
			return errors.Join(err, f.Close())
		}
	}
	for name, body := range map[string]string{
		"etc/passwd":                        "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":                         "root:x:0:\n",
		strings.TrimPrefix(MarkerFile, "/"): MarkerContent,
	} {
		write(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}, bytes.NewReader([]byte(body)))
	}
	linkNames := make([]string, 0, len(links))
	for l := range links {
		linkNames = append(linkNames, l)
	}
	slices.Sort(linkNames)
	for _, l := range linkNames {
		write(&tar.Header{Typeflag: tar.TypeSymlink, Name: l, Linkname: busyboxPath, Mode: 0o777}, nil)
	}
	if werr == nil {
		werr = tw.Close()
	}
	return errors.Join(werr, f.Close())
}
