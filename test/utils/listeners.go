package utils

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Listener is a TCP socket a process listens on.
type Listener struct {
	Process string
	Addr    net.IP
	Port    int
}

func (l Listener) String() string {
	return fmt.Sprintf("%s %s", l.Process, net.JoinHostPort(l.Addr.String(), strconv.Itoa(l.Port)))
}

// Listeners returns the TCP sockets that procs listen on, read from /proc
// (the sockets each process holds, matched with /proc/net/tcp and tcp6 by
// inode), so that a test can check that nothing listens beyond loopback.
func Listeners(procs []*Process) ([]Listener, error) {
	byInode := map[string]string{}
	for _, p := range procs {
		if exited, _ := p.Exited(); exited {
			continue
		}
		fds, err := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", p.Pid()))
		if err != nil {
			return nil, err
		}
		for _, fd := range fds {
			link, err := os.Readlink(fd)
			if err != nil {
				continue
			}
			if inode, ok := strings.CutPrefix(link, "socket:["); ok {
				byInode[strings.TrimSuffix(inode, "]")] = p.Name
			}
		}
	}
	var out []Listener
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			return nil, err
		}
		s := bufio.NewScanner(f)
		s.Scan() // the header
		for s.Scan() {
			fields := strings.Fields(s.Text())
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(fields) < 10 || fields[3] != "0A" { // 0A: LISTEN
				continue
			}
			name, ok := byInode[fields[9]]
			if !ok {
				continue
			}
			ip, port, err := parseProcAddr(fields[1])
			if err != nil {
				_ = f.Close()
				return nil, err
			}
			out = append(out, Listener{Process: name, Addr: ip, Port: port})
		}
		_ = f.Close()
		if err := s.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseProcAddr reads /proc/net/tcp's "0100007F:1F90": the address as the
// kernel stores it (32-bit words in host byte order, little-endian here)
// and the port in hex.
func parseProcAddr(s string) (net.IP, int, error) {
	addr, port, ok := strings.Cut(s, ":")
	if !ok {
		return nil, 0, fmt.Errorf("bad address %q", s)
	}
	b, err := hex.DecodeString(addr)
	if err != nil {
		return nil, 0, err
	}
	for i := 0; i+4 <= len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return nil, 0, err
	}
	return net.IP(b), int(p), nil
}
