// Package cmd is the toolhost command: its command line, parsed and
// checked once (parseCommandLine), and the ways a session is served from
// it — on stdio in this process (serve), through the holder of its root
// under --persist (front), in the holder itself (runHolder), or played
// against a temporary workspace (demo). Each builds its session's
// configuration the same way (commandLine.session).
//
// It is the top of the import graph: it may import every toolhost
// package, and none imports it. Package main only calls Run.
package cmd
