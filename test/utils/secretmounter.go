package utils

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// secretMounter plays the kubelet's part for the Deployment's Secret volume:
// it watches the Secret and writes each of its keys as a file into every
// mount directory, replacing files atomically when the Secret changes.
type secretMounter struct {
	k        *Kubectl
	ns, name string
	cancel   context.CancelFunc
	done     chan struct{}

	mu   sync.Mutex
	dirs []string
	data map[string][]byte // the Secret as last seen
}

func newSecretMounter(k *Kubectl, ns, name string) *secretMounter {
	return &secretMounter{k: k, ns: ns, name: name, done: make(chan struct{})}
}

// add mounts the Secret into dir too: at once what was last seen, and
// every change after.
func (m *secretMounter) add(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirs = append(m.dirs, dir)
	return writeAll(dir, m.data)
}

// update records the Secret's data and writes it into every directory.
func (m *secretMounter) update(data map[string][]byte) (dirs int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data = data
	var errs []error
	for _, dir := range m.dirs {
		errs = append(errs, writeAll(dir, data))
	}
	return len(m.dirs), errors.Join(errs...)
}

func (m *secretMounter) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data = nil
}

func writeAll(dir string, data map[string][]byte) error {
	var errs []error
	for key, value := range data {
		errs = append(errs, writeAtomic(filepath.Join(dir, key), value))
	}
	return errors.Join(errs...)
}

func (m *secretMounter) start(logPath string) {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		// A watch ends when the API server closes it (every few minutes)
		// or is stopped: start another, a second later at most.
		for ctx.Err() == nil {
			m.watch(ctx, logPath)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
}

// watch runs one `kubectl get --watch` of the Secret until it ends, and
// logs why it ended.
func (m *secretMounter) watch(ctx context.Context, logPath string) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer func() { _ = logFile.Close() }()
	err = m.watchInto(ctx, logFile)
	fmt.Fprintf(logFile, "%s: the watch ended: %v\n", time.Now().Format(time.RFC3339Nano), err)
}

func (m *secretMounter) watchInto(ctx context.Context, logFile *os.File) error {
	cmd := exec.CommandContext(ctx, m.k.Path, "--kubeconfig", m.k.Kubeconfig,
		"get", "secret", m.name, "-n", m.ns, "-o", "json", "--watch", "--output-watch-events")
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+m.k.CacheDir)
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	dec := json.NewDecoder(bufio.NewReader(out))
	for {
		var e struct {
			Type   string `json:"type"`
			Object struct {
				Data map[string][]byte `json:"data"`
			} `json:"object"`
		}
		if err := dec.Decode(&e); err != nil {
			_ = cmd.Wait()
			return err
		}
		if e.Type == "DELETED" {
			// Mounted files stay, as a kubelet leaves them to running pods;
			// a new replica waits for the Secret to exist again.
			m.forget()
			fmt.Fprintf(logFile, "%s: the Secret was deleted\n", time.Now().Format(time.RFC3339Nano))
			continue
		}
		dirs, err := m.update(e.Object.Data)
		if err != nil {
			fmt.Fprintf(logFile, "mount: %v\n", err)
		}
		fmt.Fprintf(logFile, "%s: %s: mounted %d keys into %d directories\n", time.Now().Format(time.RFC3339Nano), e.Type, len(e.Object.Data), dirs)
	}
}

func (m *secretMounter) stop() {
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
}

func writeAtomic(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
