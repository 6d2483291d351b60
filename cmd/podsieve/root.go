package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/podsieve/podsieve/internal/buildinfo"
)

// Exit codes shared by every subcommand.
const (
	exitOK       = 0
	exitDenied   = 1
	exitBadInput = 2
)

// kubeconfigFlag is controller-runtime's --kubeconfig flag, registered
// once. Registering it writes a package-level variable, so building the
// command tree twice at a time (tests run the CLI in parallel) would race;
// every command that talks to a cluster shares this one.
var kubeconfigFlag = sync.OnceValue(func() *flag.Flag {
	fs := flag.NewFlagSet("kubeconfig", flag.ContinueOnError)
	config.RegisterFlags(fs)
	return fs.Lookup("kubeconfig")
})

// addKubeconfigFlag adds --kubeconfig to a command's Go flag set.
func addKubeconfigFlag(fs *flag.FlagSet) {
	f := kubeconfigFlag()
	fs.Var(f.Value, f.Name, f.Usage)
}

// exitError carries a specific exit code out of a subcommand.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "podsieve",
		Short:         "Pod Security Standards admission with precise, self-served exceptions",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newVersionCommand(), newEvalCommand(), newManagerCommand(), newExceptionCommand(), newExplainCommand(), newConvertCommand(), newCompileCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of podsieve",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildinfo.String())
			return err
		},
	}
}

// run executes the command line and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// runContext is run with a context whose end stops long-running commands
// (the manager). Errors that are not an exitError are bad input (unknown
// flag, missing file).
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "Error:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitBadInput
}
