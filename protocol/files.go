package protocol

import "time"

// Encoding names how file content travels in readFile and writeFile.
type Encoding string

// The encodings of file content.
const (
	EncodingUTF8   Encoding = "utf-8"
	EncodingBase64 Encoding = "base64"
)

// ReadFileParams are the params of readFile.
type ReadFileParams struct {
	// Destination reads or writes on a destination of the server's command
	// line, under its own roots. Default: here.
	Destination string `json:"destination,omitempty"`
	// Path is the file: relative to the root, absolute inside the root, a
	// read root or the artifacts directory, or a file URI.
	Path string `json:"path"`
	// Line is the first line to read, 1-based; 0 means 1; not negative.
	// Default: 1.
	Line int `json:"line,omitempty"`
	// Limit is how many lines to read; 0 means to the end of the file; not
	// negative.
	Limit int `json:"limit,omitempty"`
	// MaxBytes is the most bytes of file content in the answer, counted
	// before base64: not negative, at most 64 MiB; 0 means the default. A whole-file read
	// of a larger file is refused with TooLarge. Default: 1 MiB.
	MaxBytes int64 `json:"maxBytes,omitempty"`
}

// ReadFileResult is the result of readFile.
type ReadFileResult struct {
	// Path is the absolute real path of the file read.
	Path string `json:"path"`
	// Content is the selected lines, "\n" included, as text or base64.
	Content string `json:"content"`
	// Encoding is "base64" when the selected bytes hold a NUL byte or are
	// not valid UTF-8 (decided per page), else "utf-8".
	Encoding Encoding `json:"encoding"`
	// Size is the size of the whole file in bytes.
	Size int64 `json:"size"`
	// StartLine is the first line returned: the params' line.
	StartLine int `json:"startLine"`
	// EndLine is the last line returned; StartLine - 1 when none.
	EndLine int `json:"endLine"`
	// TotalLines counts the lines of the whole file (0 for an empty file).
	TotalLines int `json:"totalLines"`
	// Truncated says lines remain after EndLine, or EndLine's bytes were
	// cut.
	Truncated bool `json:"truncated"`
	// MTime is the file's modification time, in UTC.
	MTime time.Time `json:"mtime"`
}

// WriteFileParams are the params of writeFile.
type WriteFileParams struct {
	// Destination reads or writes on a destination of the server's command
	// line, under its own roots. Default: here.
	Destination string `json:"destination,omitempty"`
	// Path is the file: as for readFile, but under the workspace root and
	// outside every read root and the artifacts directory.
	Path string `json:"path"`
	// Content is the new content, whole; base64 that does not decode is
	// InvalidParams. Default: empty.
	Content string `json:"content"`
	// Encoding says how Content is encoded: "utf-8" or "base64"; anything
	// else is InvalidParams. Default: "utf-8".
	Encoding Encoding `json:"encoding,omitempty"`
	// CreateDirs creates missing parent directories (mode 0755, less the
	// umask); without it a missing parent is NotFound.
	CreateDirs bool `json:"createDirs,omitempty"`
	// ExpectedSha256 is the hex sha256 (64 digits, any case) the file must
	// have now, else Conflict and nothing is written; 64 zeros means the
	// file must not exist yet. A malformed one is InvalidParams.
	ExpectedSha256 *string `json:"expectedSha256,omitempty"`
}

// WriteFileResult is the result of writeFile.
type WriteFileResult struct {
	// Path is the absolute real path of the file written: a symlink's target
	// when written through one.
	Path string `json:"path"`
	// Size is the number of bytes written, after base64 decoding.
	Size int64 `json:"size"`
	// Sha256 is the hex sha256 of the new content: the next write's
	// expectedSha256.
	Sha256 string `json:"sha256"`
}
