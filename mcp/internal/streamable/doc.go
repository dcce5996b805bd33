// Package streamable is MCP's Streamable HTTP transport (protocol
// versions 2025-11-25 and before, with sessions, and 2026-07-28, without)
// for the SDK's *sdk.Server, session by session. It is written against
// the SDK's exported Transport and Connection, not with the SDK's
// StreamableHTTPHandler, for what that handler cannot give toolhost: a
// hook on every incoming request before the SDK decodes it
// (Options.Lift), a hook on every response's result bytes and a call
// once it is on the wire (Transport.Splice), notifications the SDK has no
// method for (Transport.Notify), and custom methods, which the SDK's
// server transport refuses unless its own handler connected it.
//
// A Handler serves one endpoint:
//
//   - POST carries one JSON-RPC message (batches are 400). An initialize
//     without Mcp-Session-Id opens a session (Options.Open connects the
//     server to its Transport) and its answer carries the id. A POST
//     without a session id at MCP-Protocol-Version 2026-07-28 or later is
//     an ephemeral exchange: a Transport of its own, opened for it and
//     closed when it is answered or its client goes away (which cancels
//     the call; a notification or response without a session reaches
//     nothing: 202). Any other POST names its session: unknown, ended or
//     another principal's (Options.Principal) is 404. Notifications and
//     responses are 202; a call is answered with an SSE stream that ends
//     with its response, a session's events numbered <stream>_<index>
//     after a priming event (from 2025-11-25). A session's call goes on
//     when its client goes away: its events are kept for a GET.
//   - GET with Mcp-Session-Id is the session's standalone stream (one at
//     a time: a second is 409 while the first's client is there; from
//     2025-11-25 it is primed, so that a client that lost it resumes it
//     instead); with Last-Event-ID it
//     replays that
//     stream's kept events after it and goes on live if the stream has
//     not ended (a request still writing the stream gives it up). An
//     event whose successors the session no longer keeps is 400, never a
//     silent skip; another session's stream is 404.
//   - DELETE ends the session: 204, then its id is 404.
//
// Routing of what the server sends: a response goes on the stream of the
// POST that carried its request. Anything else written with a context
// marked by WithRequest goes on the stream of that request while it is
// open, else on the standalone stream (an exchange's one stream). The SDK
// marks the handler's context with a key of its own, so the transport
// puts each call's id into its params' _meta (under "io.toolhost/http",
// removing any a client sent) and a receiving middleware of package mcp
// reads it back with RequestID and marks the context with WithRequest.
// A request to the client (elicitation) on an exchange is refused: its
// answer would have no way back.
//
// Limits: a session keeps Options.EventBytes of events (the oldest
// dropped first), which is most of what an idle session costs: it has no
// goroutine. A POST's stream is served by its HTTP request's own; a GET's
// on HTTP/1.1 is parked (parked.go): its connection is taken from
// net/http and written only when it has events, by a goroutine that ends
// once they are written. A session with no request in flight, no call
// unanswered and no GET whose client is there for Options.SessionTimeout
// is closed.
//
// It does not cover: authentication (package httpgate decides
// Options.Principal), DNS rebinding and Origin checks, application/json
// answers (every call is answered as SSE), the Mcp-Param-* headers of
// SEP-2575 (Mcp-Method and Mcp-Name are checked), subscriptions/listen,
// batches of the 2025-03-26 protocol, and the SSE retry field.
//
// It imports the SDK and nothing of toolhost: package mcp uses it.
package streamable
