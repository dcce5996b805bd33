package demo

import (
	"context"
	"fmt"
	"os"

	"github.com/toolhost/toolhost/hub"
	"github.com/toolhost/toolhost/protocol"
)

// localDestination returns a destination that reaches another toolhost on
// this machine, on a workspace of its own: the transport is the binary
// itself, where a real one would be `ssh -T host toolhost …`.
func localDestination(root string) (hub.Spec, error) {
	self, err := os.Executable()
	if err != nil {
		return hub.Spec{}, err
	}
	return hub.Spec{Name: "local", Argv: []string{self, "--root", root, "--log-level", "warn"}}, nil
}

// destination drives the local destination: list it, run a command and a
// handle there, and read an artifact back through its prefixed path.
func (d *session) destination(ctx context.Context, results <-chan *protocol.ToolResult) error {
	d.p.say("\nA destination is a toolhost elsewhere (ssh, kubectl or docker exec; here, another")
	d.p.say("toolhost on this machine with a root of its own). It connects on first use:")
	if err := d.call(protocol.MethodDestinations, protocol.DestinationsParams{}, nil); err != nil {
		return err
	}
	var res protocol.ToolResult
	if err := d.call(protocol.MethodRunCommand, protocol.RunCommandParams{Destination: "local", Argv: []string{"sh", "-c", "echo running in $PWD"}}, &res); err != nil {
		return err
	}
	d.p.say("Its handles, notifications and artifact paths carry its name:")
	var started protocol.LongRunningResult
	if err := d.call(protocol.MethodLongRunning, protocol.LongRunningParams{StreamOutput: true,
		RunCommandParams: protocol.RunCommandParams{Destination: "local", Argv: []string{"sh", "-c", "echo far output"}}}, &started); err != nil {
		return err
	}
	var final *protocol.ToolResult
	select {
	case final = <-results:
	case <-ctx.Done():
		return fmt.Errorf("no toolResult from the destination: %w", ctx.Err())
	}
	d.p.say("Read its stdout artifact back through the prefixed path:")
	if err := d.call(protocol.MethodReadFile, protocol.ReadFileParams{Path: final.Artifacts.StdoutPath}, nil); err != nil {
		return err
	}
	return d.call(protocol.MethodDestinations, protocol.DestinationsParams{}, nil)
}
