package process

import (
	"io"
	"os"
	"os/exec"
	"sync"
)

// stdio is one process's pipes (or its terminal), both ends, as
// openStdio opens them for spawnProc.
type stdio struct {
	// files is every end opened, closed by closeAll when a later one
	// cannot be.
	files []*os.File
	// readers are the parent's read ends, pumped in order into outs:
	// stdout and stderr (or the terminal's master), then the events pipe.
	readers []*os.File
	outs    []io.Writer
	// writers are the child's ends, closed once it is forked.
	writers []*os.File
	// stdin, stdout and stderr are the child's; stdin nil: the null
	// device. events is the child's end of the events pipe (fd 3).
	stdin, stdout, stderr, events *os.File
	// input is proc.input: the terminal's master, or the write end of an
	// open stdin; nil when the process takes no input.
	input *os.File
}

// openStdio opens the pipes of req's process: a terminal (req.pty) whose
// slave is its stdin, stdout and stderr, or a pipe for each of stdout and
// stderr and, with req.openStdin, one for stdin; then the events pipe. On
// an error every end opened is closed.
func openStdio(req spawnRequest) (*stdio, error) {
	s := &stdio{stdin: req.stdin}
	if req.pty.On() {
		master, slave, err := openPty(req.pty)
		if err != nil {
			return nil, &SpawnError{Argv0: req.argv[0], Reason: err.Error(), Err: err}
		}
		s.files = append(s.files, master, slave)
		s.readers, s.outs = append(s.readers, master), append(s.outs, req.stdout)
		s.writers = append(s.writers, slave)
		s.stdin, s.stdout, s.stderr, s.input = slave, slave, slave, master
	} else {
		for _, out := range []io.Writer{req.stdout, req.stderr} {
			r, w, err := s.pipe(req, false)
			if err != nil {
				return nil, err
			}
			s.readers, s.outs, s.writers = append(s.readers, r), append(s.outs, out), append(s.writers, w)
		}
		s.stdout, s.stderr = s.writers[0], s.writers[1]
		if req.openStdin {
			w, r, err := s.pipe(req, true)
			if err != nil {
				return nil, err
			}
			s.writers = append(s.writers, r)
			s.stdin, s.input = r, w
		}
	}
	er, ew, err := s.pipe(req, false)
	if err != nil {
		return nil, err
	}
	s.readers, s.outs, s.writers = append(s.readers, er), append(s.outs, req.events), append(s.writers, ew)
	s.events = ew
	return s, nil
}

// pipe returns a pipe's end for this process and the child's; if it
// cannot, it closes every end opened so far.
func (s *stdio) pipe(req spawnRequest, childReads bool) (ours, theirs *os.File, err error) {
	if ours, theirs, err = childPipe(childReads); err != nil {
		s.closeAll()
		return nil, nil, &SpawnError{Argv0: req.argv[0], Reason: "pipe: " + err.Error(), Err: err}
	}
	s.files = append(s.files, ours, theirs)
	return ours, theirs, nil
}

// closeAll closes every end opened.
func (s *stdio) closeAll() {
	for _, f := range s.files {
		_ = f.Close()
	}
}

// command is the exec.Cmd of req's process with s's child ends, forked
// into cg when it is not nil.
func (s *stdio) command(req spawnRequest, cg *cgroup) *exec.Cmd {
	cmd := &exec.Cmd{
		Path:        req.path,
		Args:        req.argv,
		Env:         req.env,
		Dir:         req.dir,
		Stdout:      s.stdout,
		Stderr:      s.stderr,
		ExtraFiles:  []*os.File{s.events}, // fd 3: TOOLHOST_EVENTS_FD
		SysProcAttr: sysProcAttr(req.pty.On()),
	}
	if cg != nil {
		cg.setFD(cmd.SysProcAttr)
	}
	// Without one, stdin is the null device: a child reading it gets
	// EOF. The session's one open /dev/null spares the open, and its
	// setting up, that os/exec makes for a nil Stdin at every start.
	switch null, err := devNull(); {
	case s.stdin != nil:
		cmd.Stdin = s.stdin
	case err == nil:
		cmd.Stdin = null
	}
	return cmd
}

// devNull is the null device, open for reading, that children without a
// stdin of their own share; it is never closed.
var devNull = sync.OnceValues(func() (*os.File, error) { return os.Open(os.DevNull) })
