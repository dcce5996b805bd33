package fixture

// RequestType names a request method with the types of its params and
// result.
type RequestType[P, R any] string

// NotificationType names a notification method with the type of its params.
type NotificationType[P any] string

// Null stands for absent params or a null result.
//
//tsgen:type null
type Null struct{}

// MarshalJSON encodes null.
func (Null) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// Either is a Progress or a Step.
//
//tsgen:type Progress | Step
type Either struct {
	P *Progress
	S *Step
}

// MarshalJSON encodes the one that is set.
func (Either) MarshalJSON() ([]byte, error) { return nil, nil }

// Empty is an empty object.
type Empty struct{}

// Requests a client sends. The server answers each.
var (
	// RunCommandRequest runs a command and answers with its [ToolResult].
	//
	// Errors (nothing is started):
	//   - [CodeNotFound]: the cwd does not exist (data: path).
	//   - [CodePathOutsideWorkspace] the cwd is outside the root.
	RunCommandRequest = RequestType[RunCommandParams, ToolResult](MethodRunCommand)
	// LongRunningRequest starts a command behind a handle.
	LongRunningRequest = RequestType[LongRunningParams, Progress](MethodLongRunning)
	// ShutdownRequest ends the session.
	ShutdownRequest = RequestType[Null, Null]("shutdown")
	// EitherRequest answers one or the other.
	EitherRequest = RequestType[Empty, Either]("either")
)

// Notifications the server sends.
var (
	// ProgressNotification reports on a [RunCommandRequest]; see
	// [Progress.HandleID].
	ProgressNotification = NotificationType[Progress](NotifyProgress)
	// ExitNotification ends the process.
	ExitNotification = NotificationType[Null]("exit")
)

// Version is not a descriptor.
var Version = "1"
