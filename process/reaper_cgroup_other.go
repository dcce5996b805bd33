//go:build unix && !linux

package process

import (
	"errors"
	"syscall"
)

// cgroupSession is unsupported outside Linux.
type cgroupSession struct{}

func newCgroupSession(nonce string) (*cgroupSession, error) {
	return nil, errors.New("cgroups are Linux only")
}

func (s *cgroupSession) newGroup() (*cgroup, error)  { return nil, errors.ErrUnsupported }
func (s *cgroupSession) release(*cgroup, bool) error { return nil }
func (s *cgroupSession) remove() error               { return nil }

// cgroup is unsupported outside Linux.
type cgroup struct{}

func (g *cgroup) setFD(attr *syscall.SysProcAttr) {}
func (g *cgroup) pids() []int                     { return nil }
func (g *cgroup) populated() bool                 { return false }
func (g *cgroup) kill()                           {}
func (g *cgroup) remove() error                   { return nil }

func (s *cgroupSession) path() string { return "" }
