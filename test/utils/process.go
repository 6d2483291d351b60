package utils

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one component of the cluster, or one podsieve replica, run as
// a child in a process group of its own, with its output in a log file.
//
// No leak, even when a test fails or panics: Stop signals the whole group
// (a component's own children die with it), and the kernel sends SIGKILL to
// the child when the test process dies first (Pdeathsig).
type Process struct {
	Name string
	Log  string

	cmd  *exec.Cmd
	done chan struct{}
	err  error // the exit status, set before done is closed
}

// StartProcess starts path with args, env added to this process's
// environment, and stdout and stderr appended to logPath.
func StartProcess(name, logPath string, env []string, path string, args ...string) (*Process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's id, which is also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	if err := syscall.Kill(-p.Pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s to %s: %w", sig, p.Name, err)
	}
	return nil
}

// Stop sends SIGTERM to the group, waits up to grace for the process to
// exit, then sends SIGKILL and waits for it. It returns only once the
// process has exited.
func (p *Process) Stop(grace time.Duration) error {
	_, err := p.StopWithin(grace)
	return err
}

// StopWithin is Stop, and reports whether the process had to be killed.
func (p *Process) StopWithin(grace time.Duration) (killed bool, err error) {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return false, err
	}
	select {
	case <-p.done:
		return false, nil
	case <-time.After(grace):
	}
	return true, p.Kill()
}

// Kill sends SIGKILL to the group and waits for the process to exit.
func (p *Process) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit within 30s of SIGKILL", p.Name, p.Pid())
	}
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string { return tailFile(p.Log, n) }

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stopAll stops processes in reverse order of start, each within grace,
// and returns every error.
func stopAll(procs []*Process, grace time.Duration) error {
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if procs[i] == nil {
			continue
		}
		if err := procs[i].Stop(grace); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// poll calls cond every interval until it returns true or an error, or
// until timeout; the error then says what was awaited and cond's last
// error. It never sleeps past the deadline.
func poll(ctx context.Context, what string, interval, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%s: not within %s: %w", what, timeout, last)
			}
			return fmt.Errorf("%s: not within %s", what, timeout)
		case <-time.After(interval):
		}
	}
}

// registry holds every process started through a Cluster or Replicas, so
// that StopAll can stop whatever a failed setup left running.
var registry struct {
	sync.Mutex
	procs []*Process
}

func register(p *Process) {
	registry.Lock()
	defer registry.Unlock()
	registry.procs = append(registry.procs, p)
}

// StopAll stops every process this package started that still runs, newest
// first. The e2e suite calls it last, whatever happened before.
func StopAll() error {
	registry.Lock()
	procs := registry.procs
	registry.procs = nil
	registry.Unlock()
	return stopAll(procs, 10*time.Second)
}
