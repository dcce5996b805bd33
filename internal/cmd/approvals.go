package cmd

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/toolhost/toolhost/approval"
)

// runApprovals runs `toolhost approvals list|revoke`: the user's always
// grants (issue 35) from a shell, read from and written to the same file
// the servers use, under its lock.
func runApprovals(args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "Usage:\n  toolhost approvals list [--root DIR] [--json]   the always grants (of one root)\n  toolhost approvals revoke ID                    drop one, by its id")
	}
	if len(args) == 0 {
		usage()
		return 2
	}
	path, err := approval.DefaultStorePath(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost approvals: %v\n", err)
		return 1
	}
	switch args[0] {
	case "list":
		return listApprovals(path, args[1:], stdout, stderr)
	case "revoke":
		if len(args) != 2 {
			usage()
			return 2
		}
		return revokeApproval(path, args[1], stdout, stderr)
	case "-h", "--help", "help":
		usage()
		return 0
	}
	fmt.Fprintf(stderr, "toolhost approvals: unknown command %q\n", args[0])
	usage()
	return 2
}

// listApprovals prints the grants of the file at path: a line each (id,
// root, kind, target, when), or with --json the list as JSON.
func listApprovals(path string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolhost approvals list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "", "only the grants of this workspace `dir`")
	asJSON := fs.Bool("json", false, "print the grants as a JSON array")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	store, err := approval.OpenStore(path)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost approvals: %v\n", err)
		return 1
	}
	var grants []approval.Grant
	if *root != "" {
		dir, err := canonical(*root)
		if err != nil {
			fmt.Fprintf(stderr, "toolhost approvals: --root: %v\n", err)
			return 2
		}
		grants, err = store.Grants(dir)
	} else {
		grants, err = store.All()
	}
	if err != nil {
		fmt.Fprintf(stderr, "toolhost approvals: %v\n", err)
		return 1
	}
	if *asJSON {
		if grants == nil {
			grants = []approval.Grant{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(grants); err != nil {
			fmt.Fprintf(stderr, "toolhost approvals: %v\n", err)
			return 1
		}
		return 0
	}
	for _, g := range grants {
		fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\t%s\n", g.ID, g.Root, g.Kind, g.Target, g.CreatedAt.Local().Format(time.DateTime))
	}
	return 0
}

// revokeApproval removes the grant id from the file at path.
func revokeApproval(path, id string, stdout, stderr io.Writer) int {
	store, err := approval.OpenStore(path)
	if err == nil {
		err = store.Remove(id)
	}
	switch {
	case errors.Is(err, approval.ErrUnknown):
		fmt.Fprintf(stderr, "toolhost approvals: no always grant has the id %q (toolhost approvals list shows them)\n", id)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "toolhost approvals: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "revoked %s\n", id)
	return 0
}

// canonical is dir as a root is kept: absolute, through its symlinks.
func canonical(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}
