package process

// Leftovers names what a Manager's commands could leave behind were its
// process to die without Shutdown (SIGKILL runs no code): the marker
// every process of its commands carries, and its cgroup directory. A
// persisted session writes them into its journal, so that a later server
// can end what is left (KillLeftovers).
type Leftovers struct {
	// Marker is the session's nonce: every process of its commands
	// carries TOOLHOST_COMMAND=<Marker>/<commandId>.
	Marker string `json:"marker"`
	// Cgroup is the session's cgroup directory, "" without cgroups.
	Cgroup string `json:"cgroup,omitempty"`
}

// Leftovers returns what this Manager's commands could leave behind.
func (m *Manager) Leftovers() Leftovers {
	l := Leftovers{Marker: m.nonce}
	if m.cgs != nil {
		l.Cgroup = m.cgs.path()
	}
	return l
}
