// Package upstreamfixtures reads upstream pod-security-admission's fixture
// pods (test/testdata/<level>/<version>/<pass|fail>/<name>.yaml in the
// module's copy of k8s.io/pod-security-admission), for tests: the one walk
// of them that the engine's tests, internal/enginetest (which applies the
// API server's defaults) and the decoders' tests share. It imports no
// podsieve package, so that the engine's own tests can use it.
package upstreamfixtures

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"sigs.k8s.io/yaml"
)

// Count is how many fixtures the pinned pod-security-admission ships: a
// walk that finds fewer read the wrong directory.
const Count = 4537

// Fixture is one fixture pod, as upstream ships it.
type Fixture struct {
	// Rel is the path under test/testdata, with slashes.
	Rel     string
	Level   api.Level
	Version api.Version
	Fail    bool
	// Name is the file's name without .yaml: for a fail fixture, the
	// check it fails (lower case) and a number.
	Name string
	// Pod is the file decoded, without defaults; it is shared by every
	// caller in the test binary: copy it before changing it. Data is the
	// file.
	Pod  *corev1.Pod
	Data []byte
}

// Load reads every fixture once per test binary (decoding 4,500 YAML files
// is most of the cost of the tests that read them).
var Load = sync.OnceValues(func() ([]Fixture, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/pod-security-admission").Output()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(strings.TrimSpace(string(out)), "test", "testdata")
	var fixtures []Fixture
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 4 || (parts[0] != "baseline" && parts[0] != "restricted") || (parts[2] != "pass" && parts[2] != "fail") {
			return nil
		}
		v, err := api.ParseVersion(parts[1])
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pod := &corev1.Pod{}
		if err := yaml.Unmarshal(data, pod); err != nil {
			return err
		}
		fixtures = append(fixtures, Fixture{
			Rel: filepath.ToSlash(rel), Level: api.Level(parts[0]), Version: v, Fail: parts[2] == "fail",
			Name: strings.TrimSuffix(parts[3], ".yaml"), Pod: pod, Data: data,
		})
		return nil
	})
	return fixtures, err
})
