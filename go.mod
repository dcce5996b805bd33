module github.com/toolhost/toolhost

go 1.26.0

require (
	github.com/go-json-experiment/json v0.0.0-20260601182631-00ed12fed2a6
	github.com/google/go-cmp v0.7.0
	github.com/sourcegraph/conc v0.3.0
	go.lsp.dev/jsonrpc2 v1.0.1
	golang.org/x/sys v0.49.0
	golang.org/x/tools v0.52.0
)

require github.com/creack/pty v1.1.24 // indirect
