package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/podsieve/podsieve/internal/engine"
	"github.com/podsieve/podsieve/internal/offline"
	"github.com/podsieve/podsieve/internal/words"
)

// inputFlags are the flags of the commands that decide objects from files
// (eval, explain, exception generate): what to read, and the cluster to
// decide it as.
type inputFlags struct {
	files               []string
	clusterState        []string
	namespace           string
	now                 string
	exceptionsNamespace string
	background          bool
}

// bind adds the flags; --background only when the command offers it.
func (in *inputFlags) bind(f *pflag.FlagSet, background bool) {
	f.StringArrayVarP(&in.files, "filename", "f", nil, "file, directory (its kustomization's resources, else recursively *.yaml, *.yml, *.json) or - for stdin; repeatable")
	f.StringArrayVar(&in.clusterState, "cluster-state", nil, "the cluster's own objects, trusted as the cluster holds them: Namespaces (their labels), PolicyExceptions "+
		"(with their creationTimestamp, and those of --exceptions-namespace), SecurityPolicies; a path as for -f; repeatable. "+
		"From -f, Namespaces and exceptions in --exceptions-namespace are ignored and an exception counts as created at --now")
	f.StringVarP(&in.namespace, "namespace", "n", "default", "namespace of objects and exceptions that do not set one")
	f.StringVar(&in.now, "now", "", "the time to decide at, RFC3339 (default: the current time); expiresAt is compared with it")
	f.StringVar(&in.exceptionsNamespace, "exceptions-namespace", "podsieve-system", "the cluster exceptions namespace, whose exceptions may reach other namespaces")
	if background {
		f.BoolVar(&in.background, "background", false, "decide as the background scan does: only policies and exceptions with background: true count")
	}
}

// mode is whom the decisions are for: admission, or the background scan.
func (in *inputFlags) mode() engine.Mode {
	if in.background {
		return engine.Background
	}
	return engine.Admission
}

// load reads the files and the cluster state and compiles them into the
// index the cluster uses, at --now. What of the input is ignored or not
// taken as written is a warning on stderr, naming the document.
func (in *inputFlags) load(stdin io.Reader, stderr io.Writer) (*offline.Input, error) {
	now, err := parseNow(in.now)
	if err != nil {
		return nil, err
	}
	return offline.Load(in.files, stdin, offline.Options{
		Namespace: in.namespace, ExceptionsNamespace: in.exceptionsNamespace, Now: now, ClusterState: in.clusterState, Mode: in.mode(),
		Warn: func(msg string) { fmt.Fprintln(stderr, "Warning:", msg) },
	})
}

// parseNow is --now: RFC3339, or the current time when empty.
func parseNow(s string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--now %s: use RFC3339, for example 2027-01-01T00:00:00Z", s)
	}
	return t, nil
}

// requireWorkloads refuses an input with nothing to decide, for the commands
// that are about one workload.
func requireWorkloads(in *offline.Input) error {
	if len(in.Workloads) == 0 {
		return fmt.Errorf("the input holds no pod-bearing object (%s): add the workload's file with -f", kindList())
	}
	return nil
}

// kindList names the pod-bearing kinds, for messages.
func kindList() string {
	names := make([]string, len(engine.PodBearingKinds))
	for i, k := range engine.PodBearingKinds {
		names[i] = string(k.Kind)
	}
	return strings.Join(names, ", ")
}

// refusedError is exit 1 when an Enforce policy refuses an object (eval,
// explain), naming how many; nil when every object is admitted.
func refusedError(decisions []engine.Decision) error {
	n := 0
	for _, d := range decisions {
		if !d.Allowed {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return &exitError{code: exitDenied, err: fmt.Errorf("%s refused by an Enforce policy", words.Count(n, "object"))}
}
