package enginetest

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/upstreamfixtures"
)

// Fixture is one of upstream pod-security-admission's fixture pods
// (package upstreamfixtures), with the API server's defaults applied
// (engine.ApplyPodDefaults).
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

// UpstreamFixtures are upstreamfixtures.Load's, with the API server's
// defaults applied to a copy of each pod, once per test binary.
var UpstreamFixtures = sync.OnceValues(func() ([]Fixture, error) {
	all, err := upstreamfixtures.Load()
	if err != nil {
		return nil, err
	}
	fixtures := make([]Fixture, len(all))
	for i, f := range all {
		pod := f.Pod.DeepCopy()
		engine.ApplyPodDefaults(&pod.Spec)
		fixtures[i] = Fixture{Rel: f.Rel, Level: f.Level, Version: f.Version, Fail: f.Fail, Pod: pod, Data: f.Data}
	}
	return fixtures, nil
})
