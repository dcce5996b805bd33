package mcp

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// textHalf is how much of each end of a stream the text for the model
// keeps: the structured content has the whole inline output, the artifacts
// all of it.
const textHalf = 4 << 10

// asRPCError reports whether err is a toolhost error answer.
func asRPCError(err error, e **protocol.Error) bool { return errors.As(err, e) }

// structured is a result with one line of text and v as structured content.
func structured(v any, format string, args ...any) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, args...)}}, StructuredContent: v}
}

// toolResultContent is the result of a command: the text for the model
// (status, exit code, head and tail of each stream), the ToolResult as
// structured content, and a resource_link to each artifact.
func toolResultContent(res *protocol.ToolResult) *sdk.CallToolResult {
	var b strings.Builder
	b.WriteString(statusLine(res))
	if line := deniedLine(res.Network); line != "" {
		b.WriteString("\n" + line)
	}
	for _, line := range approvalLines(res.Approvals) {
		b.WriteString("\n" + line)
	}
	if res.SnapshotID != "" {
		b.WriteString("\n" + changesLine(res))
	}
	if len(res.ProtectViolations) > 0 {
		// Git runs or obeys them for the user: the model must say so.
		fmt.Fprintf(&b, "\nwrote git hooks or config that no protection covered (a repository it made, or one without them at its start); git will run or obey them for the user, so tell the user: %s", strings.Join(res.ProtectViolations, ", "))
	}
	for _, st := range []struct {
		name, text string
		cut        bool
	}{{"stdout", res.Stdout, res.StdoutTruncated}, {"stderr", res.Stderr, res.StderrTruncated}} {
		if st.text == "" {
			continue
		}
		fmt.Fprintf(&b, "\n--- %s ---\n%s", st.name, headTail(st.text))
		if !strings.HasSuffix(st.text, "\n") {
			b.WriteByte('\n')
		}
	}
	out := &sdk.CallToolResult{Content: []sdk.Content{nil}, StructuredContent: res}
	if res.CommandID != "" && res.Artifacts.OutputPath != "" {
		fmt.Fprintf(&b, "\nfull output: %s (%d bytes, %d lines)", artifactURI(res.CommandID, "output"), res.Artifacts.ByteCount, res.Artifacts.LineCount)
		for _, stream := range []string{"output", "stdout", "stderr"} {
			link := &sdk.ResourceLink{
				URI:      artifactURI(res.CommandID, stream),
				Name:     res.CommandID + " " + stream,
				MIMEType: "text/plain",
			}
			switch stream {
			case "output":
				link.Description = "the whole output, stdout and stderr interleaved, step markers included"
				size := res.Artifacts.ByteCount
				link.Size = &size
			default:
				link.Description = "the whole " + stream
			}
			out.Content = append(out.Content, link)
		}
	}
	out.Content[0] = &sdk.TextContent{Text: b.String()}
	return out
}

// statusLine says how a command ended, or that it runs.
func statusLine(res *protocol.ToolResult) string {
	switch res.Status {
	case protocol.StatusRunning:
		return fmt.Sprintf("running as handle %s after %d ms (follow it with wait_command, read_output or cancel_command)", res.HandleID, res.DurationMs)
	case protocol.StatusCompleted:
		s := "completed"
		if res.ExitCode != nil {
			s += fmt.Sprintf(", exit code %d", *res.ExitCode)
		} else if res.Signal != nil {
			s += ", killed by " + *res.Signal
		}
		s += fmt.Sprintf(" (%d ms)", res.DurationMs)
		if res.LimitExceeded != nil {
			s += "; it exceeded its " + *res.LimitExceeded + " limit"
		}
		return s
	}
	s := string(res.Status)
	if res.TimeoutReason != "" {
		s += " (" + string(res.TimeoutReason) + ")"
	}
	s += fmt.Sprintf(" after %d ms", res.DurationMs)
	if res.ExitCode != nil {
		s += fmt.Sprintf(", exit code %d", *res.ExitCode)
	} else if res.Signal != nil {
		s += ", ended by " + *res.Signal
	}
	if res.Error != nil {
		// A start that failed after the answer: what the call would have
		// answered.
		s += fmt.Sprintf(": error %d: %s", res.Error.Code, res.Error.Message)
		if d := res.Error.Data; d != nil && d.Reason != "" && !strings.Contains(res.Error.Message, d.Reason) {
			s += " (" + d.Reason + ")"
		}
	}
	return s
}

// deniedNamed is how many refused hosts deniedLine names; it counts the
// rest.
const deniedNamed = 10

// deniedLine says, in one line, which hosts the network allow-list
// refused the command, and that this is policy: the program's own error
// (curl's "CONNECT tunnel failed, response 403") reads as a fault to
// retry. It is "" when nothing was refused.
func deniedLine(n *protocol.NetworkUse) string {
	if n == nil || len(n.Denied) == 0 {
		return ""
	}
	var hosts, flags []string
	for i, d := range n.Denied {
		if i == deniedNamed {
			hosts = append(hosts, fmt.Sprintf("and %d more", len(n.Denied)-deniedNamed))
			break
		}
		hp := net.JoinHostPort(d.Host, strconv.Itoa(d.Port))
		hosts = append(hosts, hp)
		flags = append(flags, "--network-allow "+hp)
	}
	return fmt.Sprintf("refused by the network policy, not a network fault: %s (not in the allow-list; retrying will not help: the user can allow it by adding %s to the toolhost mcp command line in the client's MCP configuration)",
		strings.Join(hosts, ", "), strings.Join(flags, " "))
}

// approvalLines say how each of a command's asks was decided, a line
// each. A network ask denied without the user's answer (noClient: the
// connection that could ask ended; policy: too many asks pending, or no
// call to ask on) names the exact flag that allows the host for good,
// since the model's only way forward is its user's configuration.
func approvalLines(asks []protocol.ApprovalOutcome) []string {
	var lines []string
	for _, a := range asks {
		switch {
		case a.Decision == protocol.ApprovalAllow && a.DecidedBy == protocol.DecidedByGrant:
			lines = append(lines, fmt.Sprintf("connection to %s allowed by a grant the user gave before (%s)", a.Target, a.Scope))
		case a.Decision == protocol.ApprovalAllow:
			lines = append(lines, fmt.Sprintf("the user allowed the connection to %s (%s)", a.Target, a.Scope))
		case a.Kind == protocol.ApprovalNetwork && a.DecidedBy == protocol.DecidedByNoClient:
			lines = append(lines, fmt.Sprintf("connection to %s refused without asking: this MCP client cannot ask its user (it offers no form elicitation). The user can allow it by adding --network-allow %s to the toolhost mcp command line in the client's MCP configuration, and restarting the server", a.Target, a.Target))
		case a.DecidedBy == protocol.DecidedByUser:
			lines = append(lines, fmt.Sprintf("the user denied the connection to %s: do not retry it", a.Target))
		case a.DecidedBy == protocol.DecidedByTimeout:
			lines = append(lines, fmt.Sprintf("connection to %s refused: the user did not answer in time", a.Target))
		case a.Kind == protocol.ApprovalNetwork:
			// Policy: --approvals deny, too many asks pending, or a call
			// nobody could be asked on.
			lines = append(lines, fmt.Sprintf("connection to %s refused (%s) without the user's answer. The user can allow it by adding --network-allow %s to the toolhost mcp command line in the client's MCP configuration", a.Target, a.DecidedBy, a.Target))
		default:
			lines = append(lines, fmt.Sprintf("%s %s refused (%s)", a.Kind, a.Target, a.DecidedBy))
		}
	}
	return lines
}

// headTail keeps the first and last textHalf bytes of s, on rune
// boundaries, with a line saying what was left out.
func headTail(s string) string {
	if len(s) <= 2*textHalf+200 {
		return s
	}
	head, tail := textHalf, len(s)-textHalf
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return fmt.Sprintf("%s\n[… %d bytes left out here: read the full output resource …]\n%s", s[:head], tail-head, s[tail:])
}

// startedContent is the result of start_command.
func startedContent(res *protocol.LongRunningResult) *sdk.CallToolResult {
	return structured(res, "started handle %s (command %s, pid %d): %s\nfollow it with wait_command, read_output, write_input or cancel_command",
		res.HandleID, res.CommandID, res.PID, res.Command)
}

// OutputRead is the structured content of read_output. The bytes read
// are the result's first text content, exactly, and are not repeated here.
type OutputRead struct {
	Encoding   protocol.Encoding `json:"encoding" jsonschema:"how the first text content carries the bytes: utf-8 (the text itself) or base64"`
	Offset     int64             `json:"offset" jsonschema:"where the read began"`
	NextOffset int64             `json:"nextOffset" jsonschema:"where the next read goes on"`
	TotalBytes int64             `json:"totalBytes" jsonschema:"the output's size when it was read"`
	EOF        bool              `json:"eof" jsonschema:"the command has ended and nothing more will come"`
	Running    bool              `json:"running" jsonschema:"the command was still running"`
}

// readOutputContent is the result of read_output: the bytes read as the
// first text content, where the read stopped as the second.
func readOutputContent(res *protocol.ReadOutputResult) *sdk.CallToolResult {
	state := "the command is still running"
	switch {
	case res.EOF:
		state = "end of output: the command has ended"
	case !res.Running:
		state = "the command has ended; more to read"
	}
	enc := ""
	if res.Encoding == protocol.EncodingBase64 {
		enc = "; the bytes are base64"
	}
	return &sdk.CallToolResult{
		Content: []sdk.Content{
			&sdk.TextContent{Text: res.Data},
			&sdk.TextContent{Text: fmt.Sprintf("[bytes %d to %d of %d; nextOffset %d; %s%s]", res.Offset, res.NextOffset, res.TotalBytes, res.NextOffset, state, enc)},
		},
		StructuredContent: OutputRead{Encoding: res.Encoding, Offset: res.Offset, NextOffset: res.NextOffset, TotalBytes: res.TotalBytes, EOF: res.EOF, Running: res.Running},
	}
}

// FileRead is the structured content of read_file. The file's content is
// the result's first text content, exactly, and is not repeated here: a
// large file travels once.
type FileRead struct {
	Path       string            `json:"path" jsonschema:"the absolute real path of the file read"`
	Encoding   protocol.Encoding `json:"encoding" jsonschema:"how the first text content carries the content: utf-8 (the text itself) or base64 (a binary file)"`
	Size       int64             `json:"size" jsonschema:"the size of the whole file in bytes"`
	StartLine  int               `json:"startLine" jsonschema:"the first line returned"`
	EndLine    int               `json:"endLine" jsonschema:"the last line returned"`
	TotalLines int               `json:"totalLines" jsonschema:"the lines of the whole file"`
	Truncated  bool              `json:"truncated" jsonschema:"lines remain after endLine, or its bytes were cut at maxBytes"`
	MTime      time.Time         `json:"mtime" jsonschema:"the file's modification time"`
}

// readFileContent is the result of read_file: the content as the first
// text content (a splicer's placeholder for it), which lines it holds as
// the second.
func readFileContent(res *FileRead, content string) *sdk.CallToolResult {
	more := ""
	if res.Truncated {
		more = fmt.Sprintf("; more follows: read again from line %d", res.EndLine+1)
	}
	if res.Encoding == protocol.EncodingBase64 {
		more += "; the content is base64 (a binary file)"
	}
	return &sdk.CallToolResult{
		Content: []sdk.Content{
			&sdk.TextContent{Text: content},
			&sdk.TextContent{Text: fmt.Sprintf("[%s: lines %d to %d of %d, %d bytes%s]", res.Path, res.StartLine, res.EndLine, res.TotalLines, res.Size, more)},
		},
		StructuredContent: res,
	}
}

// listContent is the result of list_commands: a line per command.
func listContent(list *protocol.ProgressList) *sdk.CallToolResult {
	var b strings.Builder
	if len(list.Handles) == 0 {
		b.WriteString("no commands")
	}
	for _, h := range list.Handles {
		fmt.Fprintf(&b, "%s %s: %s", h.HandleID, h.Label, h.Status)
		if h.ExitCode != nil {
			fmt.Fprintf(&b, " (exit code %d)", *h.ExitCode)
		}
		if h.StepName != "" {
			fmt.Fprintf(&b, ", step %d", h.CurrentStep)
			if h.TotalSteps > 0 {
				fmt.Fprintf(&b, "/%d", h.TotalSteps)
			}
			fmt.Fprintf(&b, " %s", h.StepName)
		}
		fmt.Fprintf(&b, ", %d ms, %d bytes of output\n", h.ElapsedMs, h.OutputBytes)
	}
	return structured(list, "%s", strings.TrimRight(b.String(), "\n"))
}
