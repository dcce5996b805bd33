package fixture

// The error codes.
const (
	// CodePathOutsideWorkspace says a path is outside every root.
	CodePathOutsideWorkspace = -32001
	CodeNotFound             = -32003 // a file or directory does not exist
	codeHidden               = -1
	NotACode                 = 7
)

// Error is not a protocol type.
type Error struct{ Code int }
