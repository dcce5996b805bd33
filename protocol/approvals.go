package protocol

import "time"

// ApprovalsClientCapabilities say a client can ask its user
// (capabilities.approvals: {}): the server then sends it approval/request
// where a confined command is refused, instead of refusing at once.
type ApprovalsClientCapabilities struct{}

// ApprovalsCapability says how the session asks (the server's
// capabilities.approvals).
type ApprovalsCapability struct {
	// Ask says the server asks this client (--approvals ask, and the
	// client declared capabilities.approvals); false, every ask is denied
	// without one.
	Ask bool `json:"ask"`
	// TimeoutMs is how long an ask waits for the answer
	// (--approval-timeout); past it the ask is denied, "no answer".
	TimeoutMs int64 `json:"timeoutMs"`
	// Scopes are the scopes this server can remember an allow for.
	Scopes []ApprovalScope `json:"scopes"`
}

// ApprovalKind is what an ask is about.
type ApprovalKind string

// The kinds of ask.
const (
	// ApprovalNetwork: a confined command connects to a host:port its
	// network allow-list does not name. The proxy holds the connection
	// while the user decides.
	ApprovalNetwork ApprovalKind = "network"
	// ApprovalSandbox: a runCommand or longRunning whose sandbox is wider
	// than the server allows (a looser filesystem mode, the network on, or
	// an allow-list entry the server's list does not cover), and which
	// gives a justification. Asked before anything starts; the target
	// describes the widening.
	ApprovalSandbox ApprovalKind = "sandbox"
)

// ApprovalScope is how far an allow reaches.
type ApprovalScope string

// The scopes of an allow.
const (
	ApprovalOnce    ApprovalScope = "once"    // this connection only; not remembered
	ApprovalCommand ApprovalScope = "command" // the command, until it ends
	ApprovalSession ApprovalScope = "session" // the session (a persisted one keeps it across resumes)
	ApprovalAlways  ApprovalScope = "always"  // the user's grants file, for this root, across sessions
)

// ApprovalDecision is an answer's decision.
type ApprovalDecision string

// The decisions.
const (
	ApprovalAllow ApprovalDecision = "allow"
	ApprovalDeny  ApprovalDecision = "deny"
)

// ApprovalDecidedBy says who or what decided an ask.
type ApprovalDecidedBy string

// Who decides.
const (
	DecidedByUser     ApprovalDecidedBy = "user"     // the client's answer
	DecidedByTimeout  ApprovalDecidedBy = "timeout"  // no answer within --approval-timeout
	DecidedByNoClient ApprovalDecidedBy = "noClient" // no client could be asked: no capability, or its connection ended
	DecidedByPolicy   ApprovalDecidedBy = "policy"   // --approvals deny, too many asks pending, or an answer that is not one
	DecidedByGrant    ApprovalDecidedBy = "grant"    // a remembered allow answered without asking
)

// ApprovalRequestParams are the params of approval/request: one question
// to the client's user.
type ApprovalRequestParams struct {
	// ApprovalID names the ask.
	ApprovalID string `json:"approvalId"`
	// HandleID is the command's handle, when it has one.
	HandleID string `json:"handleId,omitempty"`
	// Argv is the command's argv.
	Argv []string `json:"argv"`
	// Cwd is the command's working directory.
	Cwd string `json:"cwd"`
	// Kind is what is asked.
	Kind ApprovalKind `json:"kind"`
	// Target is exactly what an allow grants: for network, "host:port" as
	// the command asked for it.
	Target string `json:"target"`
	// Justification is the agent's reason, when it gave one.
	Justification string `json:"justification,omitempty"`
	// Scopes are the scopes the answer may choose among.
	Scopes []ApprovalScope `json:"scopes"`
}

// ApprovalRequestResult is the client's answer to approval/request.
type ApprovalRequestResult struct {
	// Decision is allow or deny.
	Decision ApprovalDecision `json:"decision"`
	// Scope is, for an allow, one of the request's scopes.
	Scope ApprovalScope `json:"scope,omitempty"`
}

// ApprovalOutcome is how one ask of a command was decided, in its
// ToolResult's approvals.
type ApprovalOutcome struct {
	// Kind and Target are the ask's.
	Kind   ApprovalKind `json:"kind"`
	Target string       `json:"target"`
	// Decision is allow or deny.
	Decision ApprovalDecision `json:"decision"`
	// Scope is the allow's (or the remembered grant's); absent for a deny.
	Scope ApprovalScope `json:"scope,omitempty"`
	// DecidedBy says who decided.
	DecidedBy ApprovalDecidedBy `json:"decidedBy"`
}

// ApprovalsParams are the params of approvals: an empty object.
type ApprovalsParams struct{}

// ApprovalGrant is a remembered allow.
type ApprovalGrant struct {
	// ApprovalID names the grant; revokeApproval takes it.
	ApprovalID string `json:"approvalId"`
	// Kind and Target are exactly what was allowed.
	Kind   ApprovalKind `json:"kind"`
	Target string       `json:"target"`
	// Scope is command, session or always.
	Scope ApprovalScope `json:"scope"`
	// HandleID is the command's, for a command grant.
	HandleID string `json:"handleId,omitempty"`
	// CreatedAt is when it was granted.
	CreatedAt time.Time `json:"createdAt"`
}

// ApprovalList is the result of approvals: the session's command and
// session grants, and the root's always grants.
type ApprovalList []ApprovalGrant

// RevokeApprovalParams are the params of revokeApproval.
type RevokeApprovalParams struct {
	// ApprovalID names the grant, as approvals lists it.
	ApprovalID string `json:"approvalId"`
}

// RevokeApprovalResult is the result of revokeApproval.
type RevokeApprovalResult struct {
	// Revoked is the grant dropped.
	Revoked ApprovalGrant `json:"revoked"`
}
