package testenv

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Kubectl runs the kubectl that hack/setup-envtest.sh built against the test
// API server, as a cluster admin, and returns what a user would see.
func Kubectl(env *envtest.Environment, args ...string) (string, error) {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	k, err := user.Kubectl()
	if err != nil {
		return "", err
	}
	stdout, stderr, err := k.Run(args...)
	errText, _ := io.ReadAll(stderr)
	out, readErr := io.ReadAll(stdout)
	if err != nil {
		// stdout too: kubectl diff says what differs there, and exits 1.
		return "", fmt.Errorf("kubectl %s: %w: %s%s", strings.Join(args, " "), err, errText, out)
	}
	return string(out), readErr
}

// Columns splits kubectl's table output into rows of cells. kubectl
// left-aligns every cell under its header, so the headers' offsets cut each
// line; this keeps empty cells and values with spaces ("Running as Non-root").
func Columns(out string) [][]string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var starts []int
	for _, loc := range regexp.MustCompile(`\S+`).FindAllStringIndex(lines[0], -1) {
		starts = append(starts, loc[0])
	}
	rows := make([][]string, 0, len(lines))
	for _, line := range lines {
		cells := make([]string, len(starts))
		for i, start := range starts {
			end := len(line)
			if i+1 < len(starts) && starts[i+1] < end {
				end = starts[i+1]
			}
			if start < end {
				cells[i] = strings.TrimSpace(line[start:end])
			}
		}
		rows = append(rows, cells)
	}
	return rows
}

// Row returns the first row whose cells include all of keys, or nil.
func Row(rows [][]string, keys ...string) []string {
	for _, r := range rows {
		if !slices.ContainsFunc(keys, func(k string) bool { return !slices.Contains(r, k) }) {
			return r
		}
	}
	return nil
}
