//go:build linux

package sandbox_test

import (
	"errors"
	"fmt"
	"log"
	"os/exec"
	"syscall"

	"github.com/toolhost/toolhost/sandbox"
)

// ExampleStart starts a command the way a server would: its own process
// group and Pdeathsig, confined to the workspace with the network off and
// at most 256 tasks; a kernel that cannot give that refuses.
func ExampleStart() {
	cmd := exec.Command("sh", "-c", "make test")
	cmd.Dir = "/srv/ws"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	sb, err := sandbox.Start(cmd, sandbox.Spec{
		Policy: sandbox.Policy{
			Filesystem: sandbox.WorkspaceWrite,
			Network:    false,
			Root:       "/srv/ws",
			TempDir:    "/tmp/toolhost-1234/cmd-7/tmp",
			CacheDir:   "/tmp/toolhost-1234/cache",
		},
		Limits:  sandbox.Limits{Pids: 256},
		Require: true,
		OnLimit: func(l sandbox.Limit) { log.Printf("limit %s hit: the command is being killed", l) },
	})
	var missing *sandbox.UnavailableError
	if errors.As(err, &missing) {
		fmt.Println("refused:", missing.Missing) // JSON-RPC -32010, data: missing.Missing
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	waitErr := cmd.Wait()
	exceeded, err := sb.Finish()
	if err != nil {
		log.Print(err)
	}
	r := sb.Report()
	fmt.Println(waitErr, r.Filesystem, r.Network, r.EnforcedBy, exceeded)
}
