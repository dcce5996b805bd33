package streamable

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	headerSession   = "Mcp-Session-Id"
	headerVersion   = "Mcp-Protocol-Version"
	headerLastEvent = "Last-Event-ID"
	headerMethod    = "Mcp-Method"
	headerName      = "Mcp-Name"

	version20250326 = "2025-03-26"
	version20251125 = "2025-11-25"
	version20260728 = "2026-07-28"

	// codeSessionNotFound is the JSON-RPC code of a 404 for a session.
	codeSessionNotFound = -32001
)

// Options configure a Handler.
type Options struct {
	// MaxBody bounds a POST's body: one over it is 413 (0: 4 MiB).
	MaxBody int64
	// SessionTimeout closes a session with no request for this long (0:
	// never); a request in flight or an open GET stream keeps it alive.
	SessionTimeout time.Duration
	// EventBytes bounds the bytes of SSE events kept per session for
	// resumption with Last-Event-ID (0: 1 MiB); the oldest are dropped
	// first.
	EventBytes int
	Log        *slog.Logger
	// Principal names who sent a request (the auth gate's answer; nil:
	// everyone is ""). A session belongs to the principal that opened it:
	// another principal's request for it is 404, exactly as for an unknown
	// session.
	Principal func(*http.Request) string
	// Open serves a new session: it is given the session's transport,
	// sets its hooks (Splice), connects the SDK server to it
	// (server.Connect(ctx, t, nil)) and returns; an error is a 500 and the
	// session is dropped. The session's end reaches the server as its
	// Connection's Read returning io.EOF.
	Open func(t *Transport) error
	// Lift is applied to every incoming JSON-RPC request before Read
	// returns it (nil: none).
	Lift func(*jsonrpc.Request)
}

// Handler serves MCP's Streamable HTTP transport at one endpoint.
type Handler struct {
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// sessions are the live sessions by id, exchanges the ephemeral
	// exchanges in flight; closed is set by Close. Guarded by mu.
	sessions  map[string]*Transport
	exchanges map[*Transport]struct{}
	closed    bool
	// serving counts the ServeHTTP calls in flight, added to under mu
	// while not closed: Close waits for them.
	serving sync.WaitGroup
	// drains counts the drains of parked streams running (parked.go),
	// added to under their Transport's mu while it is not closed, or by
	// its Close: Close waits for them once every session is closed.
	drains sync.WaitGroup
}

// NewHandler returns a Handler serving with opts.
func NewHandler(opts Options) *Handler {
	if opts.MaxBody <= 0 {
		opts.MaxBody = 4 << 20
	}
	if opts.EventBytes <= 0 {
		opts.EventBytes = 1 << 20
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Principal == nil {
		opts.Principal = func(*http.Request) string { return "" }
	}
	return &Handler{opts: opts, log: opts.Log, sessions: make(map[string]*Transport), exchanges: make(map[*Transport]struct{})}
}

// Sessions returns the number of live sessions.
func (h *Handler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// Close closes every session and exchange and waits for the requests
// serving them to return. Requests after it are 503.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closed = true
	all := make([]*Transport, 0, len(h.sessions)+len(h.exchanges))
	for _, t := range h.sessions {
		all = append(all, t)
	}
	for t := range h.exchanges {
		all = append(all, t)
	}
	h.mu.Unlock()
	for _, t := range all {
		t.Close()
	}
	h.serving.Wait()
	h.drains.Wait()
}

// ServeHTTP serves POST, GET and DELETE; other methods are 405.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		refuse(w, http.StatusMethodNotAllowed, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "method "+r.Method+" not allowed: use POST, GET or DELETE")
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		refuse(w, http.StatusServiceUnavailable, jsonrpc.ID{}, jsonrpc.CodeInternalError, "the server is shutting down")
		return
	}
	h.serving.Add(1)
	h.mu.Unlock()
	defer h.serving.Done()
	switch r.Method {
	case http.MethodPost:
		h.servePOST(w, r)
	case http.MethodGet:
		h.serveGET(w, r)
	case http.MethodDelete:
		h.serveDELETE(w, r)
	}
}

// refuse answers a request with status and a JSON-RPC error.
func refuse(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, msg string) {
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: msg}})
	if err != nil {
		b = nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// checkVersion refuses a request whose MCP-Protocol-Version the SDK does
// not know; it returns the header's value.
func checkVersion(w http.ResponseWriter, r *http.Request) (version string, ok bool) {
	v := r.Header.Get(headerVersion)
	if v != "" && !slices.Contains(sdk.SupportedProtocolVersions(), v) {
		refuse(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("unsupported %s %q (supported: %s)", headerVersion, v, strings.Join(sdk.SupportedProtocolVersions(), ", ")))
		return "", false
	}
	return v, true
}

// lookup returns principal's session id; nil if there is none.
func (h *Handler) lookup(id, principal string) *Transport {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.sessions[id]; t != nil && t.principal == principal {
		return t
	}
	return nil
}

// session returns the session the request names, or answers it: 400
// without a session id, 404 for one that is unknown, ended or another
// principal's. The session has the request counted (enter): the caller
// must leave.
func (h *Handler) session(w http.ResponseWriter, r *http.Request) *Transport {
	id := r.Header.Get(headerSession)
	if id == "" {
		refuse(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "missing Mcp-Session-Id")
		return nil
	}
	t := h.lookup(id, h.opts.Principal(r))
	if t == nil || !t.enter() {
		refuse(w, http.StatusNotFound, jsonrpc.ID{}, codeSessionNotFound, "session not found")
		return nil
	}
	return t
}

// forget removes an ended transport.
func (h *Handler) forget(t *Transport) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.ephemeral {
		delete(h.exchanges, t)
	} else if h.sessions[t.id] == t {
		delete(h.sessions, t.id)
	}
}

// newTransport makes a transport; it is not yet registered.
func (h *Handler) newTransport(id, principal string, ephemeral bool) *Transport {
	return &Transport{
		h:         h,
		id:        id,
		principal: principal,
		ephemeral: ephemeral,
		incoming:  make(chan jsonrpc.Message),
		done:      make(chan struct{}),
		streams:   make(map[string]*stream),
		calls:     make(map[jsonrpc.ID]*stream),
	}
}

// accepts reports whether the Accept header values allow application/json
// and text/event-stream.
func accepts(values []string) (jsonOK, sseOK bool) {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			base, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				sseOK = true
			case "*/*":
				jsonOK, sseOK = true, true
			}
		}
	}
	return jsonOK, sseOK
}

// servePOST serves a message from the client.
func (h *Handler) servePOST(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		refuse(w, http.StatusUnsupportedMediaType, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Content-Type must be application/json")
		return
	}
	if jsonOK, sseOK := accepts(r.Header.Values("Accept")); !jsonOK || !sseOK {
		refuse(w, http.StatusNotAcceptable, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Accept must allow application/json and text/event-stream")
		return
	}
	if r.Header.Get(headerLastEvent) != "" {
		refuse(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Last-Event-ID is for GET: a POST cannot resume a stream")
		return
	}
	version, ok := checkVersion(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			refuse(w, http.StatusRequestEntityTooLarge, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf("request body over %d bytes", mbe.Limit))
			return
		}
		refuse(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "reading the body: "+err.Error())
		return
	}
	msg := decode(w, body)
	if msg == nil {
		return
	}
	req, _ := msg.(*jsonrpc.Request)
	initialize := req != nil && req.Method == "initialize"
	switch {
	case r.Header.Get(headerSession) != "":
		if version >= version20260728 {
			refuse(w, http.StatusBadRequest, jsonrpc.ID{}, sdk.CodeUnsupportedProtocolVersion, "protocol version "+version+" has no sessions: send no Mcp-Session-Id")
			return
		}
		t := h.session(w, r)
		if t == nil {
			return
		}
		defer t.leave()
		if initialize {
			refuse(w, http.StatusBadRequest, req.ID, jsonrpc.CodeInvalidRequest, "the session is initialized already: initialize opens a new session, without Mcp-Session-Id")
			return
		}
		h.serveMessage(w, r, t, msg, version, false)
	case version >= version20260728:
		h.serveExchange(w, r, msg, version)
	case initialize:
		h.openSession(w, r, req)
	default:
		refuse(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "missing Mcp-Session-Id: initialize first")
	}
}

// decode decodes a POST's body, one JSON-RPC message, or answers the
// request and returns nil.
func decode(w http.ResponseWriter, body []byte) jsonrpc.Message {
	b := bytes.TrimSpace(body)
	if len(b) == 0 || !json.Valid(b) {
		refuse(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: the body is not JSON")
		return nil
	}
	if b[0] == '[' {
		refuse(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported: send one message per POST")
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		refuse(w, http.StatusBadRequest, idOf(b), jsonrpc.CodeInvalidRequest, "invalid JSON-RPC message: "+err.Error())
		return nil
	}
	return msg
}

// idOf returns the id of a message that could not be decoded, if it has
// a usable one.
func idOf(b []byte) jsonrpc.ID {
	var m struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(b, &m) != nil {
		return jsonrpc.ID{}
	}
	id, _ := jsonrpc.MakeID(m.ID)
	return id
}

// openSession opens a session with an initialize request.
func (h *Handler) openSession(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) {
	t := h.newTransport(rand.Text(), h.opts.Principal(r), false)
	t.initID = req.ID
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		refuse(w, http.StatusServiceUnavailable, req.ID, jsonrpc.CodeInternalError, "the server is shutting down")
		return
	}
	h.sessions[t.id] = t
	h.mu.Unlock()
	if err := h.open(t); err != nil {
		t.Close()
		h.log.Error("opening an MCP session failed", "err", err)
		refuse(w, http.StatusInternalServerError, req.ID, jsonrpc.CodeInternalError, "opening the session failed")
		return
	}
	if !t.enter() {
		refuse(w, http.StatusNotFound, req.ID, codeSessionNotFound, "session not found")
		return
	}
	defer t.leave()
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(req.Params, &p)
	h.serveMessage(w, r, t, req, p.ProtocolVersion, true)
	t.mu.Lock()
	failed := t.initFailed
	t.mu.Unlock()
	if failed {
		t.Close()
	}
}

// open calls Options.Open.
func (h *Handler) open(t *Transport) error {
	if h.opts.Open == nil {
		return errors.New("no Options.Open")
	}
	return h.opts.Open(t)
}

// serveExchange serves a POST of the 2026-07-28 protocol: a transport of
// its own, opened for it and closed with it.
func (h *Handler) serveExchange(w http.ResponseWriter, r *http.Request, msg jsonrpc.Message, version string) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		// A notification or response without a session has nothing to
		// reach.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if code, err := checkExchange(r, req, version); err != nil {
		refuse(w, http.StatusBadRequest, req.ID, code, err.Error())
		return
	}
	t := h.newTransport("", h.opts.Principal(r), true)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		refuse(w, http.StatusServiceUnavailable, req.ID, jsonrpc.CodeInternalError, "the server is shutting down")
		return
	}
	h.exchanges[t] = struct{}{}
	h.mu.Unlock()
	defer t.Close()
	if err := h.open(t); err != nil {
		h.log.Error("opening an MCP exchange failed", "err", err)
		refuse(w, http.StatusInternalServerError, req.ID, jsonrpc.CodeInternalError, "opening the exchange failed")
		return
	}
	h.serveMessage(w, r, t, msg, version, false)
}

// checkExchange checks what SEP-2575 requires of a request without a
// session: Mcp-Method (and Mcp-Name) headers matching the body, and the
// protocol version in _meta matching MCP-Protocol-Version.
func checkExchange(r *http.Request, req *jsonrpc.Request, version string) (int64, error) {
	if m := r.Header.Get(headerMethod); m != req.Method {
		return sdk.CodeHeaderMismatch, fmt.Errorf("%s header %q does not match the method %q", headerMethod, m, req.Method)
	}
	var p struct {
		Name string         `json:"name"`
		URI  string         `json:"uri"`
		Meta map[string]any `json:"_meta"`
	}
	_ = json.Unmarshal(req.Params, &p)
	name, named := p.Name, false
	switch req.Method {
	case "tools/call", "prompts/get":
		named = true
	case "resources/read":
		name, named = p.URI, true
	}
	if n := r.Header.Get(headerName); named && n != name {
		return sdk.CodeHeaderMismatch, fmt.Errorf("%s header %q does not match %q", headerName, n, name)
	}
	mv, _ := p.Meta[sdk.MetaKeyProtocolVersion].(string)
	if mv == "" {
		return jsonrpc.CodeInvalidParams, fmt.Errorf("missing _meta %q: a request without a session carries its protocol version", sdk.MetaKeyProtocolVersion)
	}
	if mv != version {
		return sdk.CodeHeaderMismatch, fmt.Errorf("%s header %q does not match _meta %q %q", headerVersion, version, sdk.MetaKeyProtocolVersion, mv)
	}
	return 0, nil
}

// serveMessage delivers a POST's message to the session. Notifications
// and responses are answered 202; a call with an SSE stream that ends
// with its response.
func (h *Handler) serveMessage(w http.ResponseWriter, r *http.Request, t *Transport, msg jsonrpc.Message, version string, initialize bool) {
	req, isReq := msg.(*jsonrpc.Request)
	if isReq && h.opts.Lift != nil {
		h.opts.Lift(req)
	}
	if !isReq || !req.IsCall() {
		if !t.deliver(msg) {
			refuse(w, http.StatusNotFound, jsonrpc.ID{}, codeSessionNotFound, "session not found")
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	// An initialize sends nothing while it is handled, so it needs no
	// mark; and the SDK keeps its params for the session's life, where a
	// _meta costs 5 KiB (its decoder makes every map with room for 64).
	// One a client sent is still replaced.
	if !initialize || mayHaveMeta(req.Params) {
		markRequest(req)
	}
	if version == "" {
		version = version20250326
	}

	s := &stream{id: rand.Text(), resumable: !t.ephemeral, calls: 1}
	o := &outlet{wake: make(chan struct{}, 1)}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		refuse(w, http.StatusNotFound, req.ID, codeSessionNotFound, "session not found")
		return
	}
	if t.calls[req.ID] != nil {
		t.mu.Unlock()
		refuse(w, http.StatusBadRequest, req.ID, jsonrpc.CodeInvalidRequest, fmt.Sprintf("request %v is in flight already", req.ID.Raw()))
		return
	}
	t.calls[req.ID] = s
	t.streams[s.id] = s
	if t.ephemeral {
		t.exchange = s
	}
	s.out = o
	if s.resumable && version >= version20251125 {
		// The priming event: an id to resume from before any message.
		t.appendLocked(s, event{})
	}
	t.touchLocked()
	t.mu.Unlock()

	var start func(*event) bool
	if t.ephemeral {
		// The status waits for the first event: a protocol error alone is
		// answered with its own status (SEP-2575).
		start = func(ev *event) bool {
			if ev.status != 0 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(ev.status)
				_, _ = w.Write(ev.data)
				return true
			}
			sseHeaders(w)
			w.WriteHeader(http.StatusOK)
			return false
		}
	} else {
		sseHeaders(w)
		if initialize {
			w.Header().Set(headerSession, t.id)
		}
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
	}
	// The client going away does not withdraw the call: its answer is kept
	// for a GET with Last-Event-ID.
	if !t.deliver(req) {
		return
	}
	t.pump(r.Context(), w, s, o, start)
}

// sseHeaders sets the headers of an SSE stream.
func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
}

// deliver hands msg to Read; false if the session ended first.
func (t *Transport) deliver(msg jsonrpc.Message) bool {
	select {
	case t.incoming <- msg:
		return true
	case <-t.done:
		return false
	}
}

// serveGET serves the standalone SSE stream, or with Last-Event-ID the
// rest of a stream.
func (h *Handler) serveGET(w http.ResponseWriter, r *http.Request) {
	if _, sseOK := accepts(r.Header.Values("Accept")); !sseOK {
		refuse(w, http.StatusNotAcceptable, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Accept must allow text/event-stream")
		return
	}
	version, ok := checkVersion(w, r)
	if !ok {
		return
	}
	t := h.session(w, r)
	if t == nil {
		return
	}
	defer t.leave()
	o := &outlet{wake: make(chan struct{}, 1)}
	var dropped []func()
	lastID := r.Header.Get(headerLastEvent)
	if lastID == "" {
		t.probeStandalone()
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		refuse(w, http.StatusNotFound, jsonrpc.ID{}, codeSessionNotFound, "session not found")
		return
	}
	var s *stream
	if lastID != "" {
		sid, idx, ok := parseEventID(lastID)
		if !ok {
			t.mu.Unlock()
			refuse(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf("malformed Last-Event-ID %q", lastID))
			return
		}
		s = t.streams[sid]
		if s == nil {
			t.mu.Unlock()
			if h.holdsStream(sid, t) {
				refuse(w, http.StatusNotFound, jsonrpc.ID{}, codeSessionNotFound, "session not found")
				return
			}
			refuse(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Last-Event-ID %q: the session keeps no such stream (it never had it, or dropped its events to keep %d bytes)", lastID, h.opts.EventBytes))
			return
		}
		first := s.next - len(s.events)
		switch {
		case idx >= s.next:
			t.mu.Unlock()
			refuse(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Last-Event-ID %q: no such event was sent", lastID))
			return
		case idx+1 < first:
			t.mu.Unlock()
			refuse(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Last-Event-ID %q: the events after it are no longer kept (the session keeps %d bytes of events)", lastID, h.opts.EventBytes))
			return
		}
		if s.out != nil {
			// The client resumes: the request still writing is gone.
			t.wakeLocked(s, s.out)
		}
		o.sent = idx + 1
	} else {
		s = t.standaloneLocked()
		if s.out != nil {
			t.mu.Unlock()
			refuse(w, http.StatusConflict, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "the standalone SSE stream is open already")
			return
		}
		if version >= version20251125 {
			// A priming event: a client whose connection drops before any
			// message comes back with Last-Event-ID, and takes the stream
			// over from the request that wrote it, rather than being 409.
			dropped = t.appendLocked(s, event{})
		}
		// What was never written on a connection, as far as it is kept.
		o.sent = max(s.unsent, s.next-len(s.events))
	}
	s.out = o
	t.mu.Unlock()
	run(dropped)

	sseHeaders(w)
	if t.park(w, r, s, o, lastID == "") {
		return
	}
	w.WriteHeader(http.StatusOK)
	if lastID == "" {
		// A comment, so that proxies pass the headers on at once.
		_, _ = io.WriteString(w, ": ok\n\n")
	}
	_ = http.NewResponseController(w).Flush()
	t.pump(r.Context(), w, s, o, nil)
}

// probeStandalone drops the session's standalone stream's parked outlet
// if its client has gone (parked.go), so that a GET taking the stream
// over is not refused for a connection that is no more.
func (t *Transport) probeStandalone() {
	t.mu.Lock()
	s := t.standalone
	if s == nil || s.out == nil || s.out.parked == nil || t.closed {
		t.mu.Unlock()
		return
	}
	o, p := s.out, s.out.parked
	t.mu.Unlock()
	if p.alive() {
		return
	}
	t.mu.Lock()
	if s.out == o && !t.closed {
		t.dropLocked(s, o)
	}
	t.mu.Unlock()
}

// holdsStream reports whether a session other than t has a stream id.
func (h *Handler) holdsStream(id string, t *Transport) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.sessions {
		if o == t {
			continue
		}
		o.mu.Lock()
		held := o.streams[id] != nil
		o.mu.Unlock()
		if held {
			return true
		}
	}
	return false
}

// parseEventID parses an event id, <streamID>_<index>.
func parseEventID(id string) (stream string, idx int, ok bool) {
	i := strings.LastIndexByte(id, '_')
	if i <= 0 {
		return "", 0, false
	}
	idx, err := strconv.Atoi(id[i+1:])
	if err != nil || idx < 0 {
		return "", 0, false
	}
	return id[:i], idx, true
}

// serveDELETE ends a session.
func (h *Handler) serveDELETE(w http.ResponseWriter, r *http.Request) {
	if _, ok := checkVersion(w, r); !ok {
		return
	}
	t := h.session(w, r)
	if t == nil {
		return
	}
	t.leave()
	t.Close()
	w.WriteHeader(http.StatusNoContent)
}
