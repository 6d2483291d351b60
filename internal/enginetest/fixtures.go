package enginetest

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

	"github.com/podsieve/podsieve/internal/engine"
)

// Fixture is one of upstream pod-security-admission's fixture pods
// (test/testdata/<level>/<version>/<pass|fail>/<name>.yaml), with the API
// server's defaults applied (engine.ApplyPodDefaults).
type Fixture struct {
	// Rel is the path under test/testdata.
	Rel     string
	Level   api.Level
	Version api.Version
	Fail    bool
	// Pod is the fixture decoded, with the API server's defaults; Data is
	// the file as upstream ships it.
	Pod  *corev1.Pod
	Data []byte
}

// UpstreamFixtures reads every upstream fixture of the module's
// pod-security-admission once per test binary.
var UpstreamFixtures = sync.OnceValues(func() ([]Fixture, error) {
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
		engine.ApplyPodDefaults(&pod.Spec)
		fixtures = append(fixtures, Fixture{Rel: filepath.ToSlash(rel), Level: api.Level(parts[0]), Version: v, Fail: parts[2] == "fail", Pod: pod, Data: data})
		return nil
	})
	return fixtures, err
})
