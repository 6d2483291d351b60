package utils

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Kubectl runs the built kubectl with one kubeconfig: what a user types.
type Kubectl struct {
	Path       string
	Kubeconfig string
	// As impersonates a user (kubectl --as) when set, with AsGroups.
	As       string
	AsGroups []string
	// Timeout bounds each command (default one minute).
	Timeout time.Duration
	// CacheDir is kubectl's discovery cache (KUBECACHEDIR), kept out of
	// $HOME/.kube when set.
	CacheDir string
}

// Result is what a user reads after a command.
type Result struct {
	Stdout, Stderr string
}

// Combined is stdout then stderr, as a terminal shows them.
func (r Result) Combined() string { return r.Stdout + r.Stderr }

// Error is a kubectl command that failed: its arguments, its exit status
// and what it printed.
type Error struct {
	Args   []string
	Err    error
	Result Result
}

func (e *Error) Error() string {
	return fmt.Sprintf("kubectl %s: %v: %s%s", strings.Join(e.Args, " "), e.Err, e.Result.Stdout, e.Result.Stderr)
}

func (e *Error) Unwrap() error { return e.Err }

// AsUser returns a copy of k that impersonates user in groups.
func (k *Kubectl) AsUser(user string, groups ...string) *Kubectl {
	c := *k
	c.As, c.AsGroups = user, groups
	return &c
}

// Run runs kubectl with args and returns its stdout; the error is an
// *Error holding everything it printed.
func (k *Kubectl) Run(ctx context.Context, args ...string) (string, error) {
	r, err := k.Exec(ctx, "", args...)
	return r.Stdout, err
}

// RunStdin is Run with stdin.
func (k *Kubectl) RunStdin(ctx context.Context, stdin string, args ...string) (string, error) {
	r, err := k.Exec(ctx, stdin, args...)
	return r.Stdout, err
}

// Exec runs kubectl and returns both outputs, and an *Error when it fails.
func (k *Kubectl) Exec(ctx context.Context, stdin string, args ...string) (Result, error) {
	timeout := k.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := append([]string{"--kubeconfig", k.Kubeconfig}, args...)
	if k.As != "" {
		full = append(full, "--as", k.As)
		for _, g := range k.AsGroups {
			full = append(full, "--as-group", g)
		}
	}
	cmd := exec.CommandContext(ctx, k.Path, full...)
	if k.CacheDir != "" {
		cmd.Env = append(os.Environ(), "KUBECACHEDIR="+k.CacheDir)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	if err != nil {
		return r, &Error{Args: args, Err: err, Result: r}
	}
	return r, nil
}
