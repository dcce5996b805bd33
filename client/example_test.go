package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// Example plays a short session with a toolhost server run in this process
// over pipes. Against the binary, client.Start(ctx, exec.Command("toolhost",
// "--root", dir), nil) gives the same client.
func Example() {
	ctx := context.Background()
	root, err := os.MkdirTemp("", "toolhost-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(root)

	// The server reads what the client writes, and the other way round.
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	srv := tools.NewServer(tools.Config{Root: root, Env: os.Environ(), DisableCgroups: true}, rpc.Options{})
	exited := make(chan int, 1)
	go func() { // owned by Example: it waits on exited
		exited <- srv.Serve(serverIn, serverOut)
		serverOut.Close()
	}()

	c := client.New(clientIn, clientOut, nil)
	defer c.Close()
	toolResults := make(chan *protocol.ToolResult, 1)
	client.OnNotification(c, protocol.ToolResultNotification, func(r *protocol.ToolResult) { toolResults <- r })

	if _, err := c.Initialize(ctx, nil); err != nil {
		fmt.Println("initialize:", err)
		return
	}
	c.Initialized(ctx)

	res, err := c.RunCommand(ctx, &protocol.RunCommandParams{Argv: []string{"echo", "hello"}})
	if err != nil {
		fmt.Println("runCommand:", err)
		return
	}
	fmt.Printf("runCommand: %s, exit %d, stdout %q\n", res.Status, *res.ExitCode, res.Stdout)

	h, err := c.LongRunning(ctx, &protocol.LongRunningParams{
		Label:            "build",
		RunCommandParams: protocol.RunCommandParams{Argv: []string{"sh", "-c", "echo compiling; exit 2"}},
	})
	if err != nil {
		fmt.Println("longRunning:", err)
		return
	}
	end := <-toolResults
	fmt.Printf("toolResult of the handle: %v, exit %d\n", end.HandleID == h.HandleID, *end.ExitCode)

	_, err = c.ReadFile(ctx, &protocol.ReadFileParams{Path: "../elsewhere.txt"})
	fmt.Println("readFile outside the root is refused:", errors.Is(err, protocol.ErrPathOutsideWorkspace))

	c.Shutdown(ctx)
	c.Exit(ctx)
	fmt.Println("server exit code:", <-exited)
	// Output:
	// runCommand: completed, exit 0, stdout "hello\n"
	// toolResult of the handle: true, exit 2
	// readFile outside the root is refused: true
	// server exit code: 0
}
