package process

import (
	"fmt"
	"os"
	"testing"

	"github.com/toolhost/toolhost/internal/testtmp"
)

// helperBin is this test binary, at a path a confined command sees.
var helperBin = os.Args[0]

// TestMain moves the tests' temporary directories (TMPDIR) and the helper
// binary (helperBin) out of the host's /tmp, where go test builds the
// binary: a confined command has a /tmp of its own, which hides the
// host's, and the tests expect to find their files at their paths.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(m.Run()) // a helper run as a command: nothing to move
	}
	bin, done, err := testtmp.OutOfTmp("proc")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	helperBin = bin
	code := m.Run()
	done()
	os.Exit(code)
}
