//go:build e2e && linux

package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"unsafe"
)

// inNetns marks the copy of the test binary that runs in the private
// network namespace.
const inNetns = "PODSIEVE_E2E_IN_NETNS"

// TestMain runs the suite in a network namespace of its own, where the only
// interface is loopback, when it may (as root; E2E_NETNS=0 turns it off).
// Every component binds to 127.0.0.1 anyway, but podsieve's webhook server
// cannot be told an address and listens on all of them; in the namespace,
// all of them is 127.0.0.1, and nothing the cluster does can reach another
// machine. Without the privilege the suite runs in the machine's namespace.
func TestMain(m *testing.M) {
	switch {
	case os.Getenv(inNetns) == "1":
		if err := loopbackUp(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: bring loopback up in the private network namespace:", err)
			os.Exit(1)
		}
	case os.Getenv("E2E_NETNS") != "0":
		code, err := reexecInNetns()
		if err == nil {
			os.Exit(code)
		}
		fmt.Fprintf(os.Stderr, "e2e: running in this machine's network namespace: cannot create one (%v)\n", err)
	}
	os.Exit(m.Run())
}

// reexecInNetns runs this test binary again, with the same arguments, in a
// new network namespace, and returns its exit code. It returns an error
// only when the namespace cannot be created.
func reexecInNetns() (int, error) {
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), inNetns+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	// An interrupt reaches the child too (same process group); wait for it
	// to clean up rather than die first.
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		signal.Reset(os.Interrupt, syscall.SIGTERM)
		return 0, err
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 1, nil
	}
	return 0, nil
}

// loopbackUp sets the lo interface up (a new network namespace starts with
// it down), as `ip link set lo up` does, with the SIOCSIFFLAGS ioctl.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = syscall.Close(fd) }()
	// struct ifreq: the name, then a union whose first member is the flags.
	var ifr [40]byte
	copy(ifr[:], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return e
	}
	*(*uint16)(unsafe.Pointer(&ifr[16])) |= syscall.IFF_UP | syscall.IFF_RUNNING
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return e
	}
	return nil
}
