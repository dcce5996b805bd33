package dockertest

import (
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// awaitReaped waits up to limit for pid to leave /proc (no zombie left)
// and says whether it did. The exit is an event, on the process's pidfd;
// its reaper's wait that follows is seen in /proc only, looked at on a
// ticker.
func awaitReaped(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, int(max(time.Until(deadline).Milliseconds(), 0)))
			if err != unix.EINTR {
				break
			}
		}
		unix.Close(fd)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
}
