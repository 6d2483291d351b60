package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/podsieve/podsieve/internal/testenv"
	"github.com/podsieve/podsieve/test/utils"
)

// step is one thing a user does, with what they read.
type step struct {
	title string
	// dev runs the step as the developer "dev", an editor of staging and
	// prod (kubectl --as=dev); the cluster admin runs it otherwise.
	dev bool
	// manifest is applied with kubectl apply -f - when set; args run
	// kubectl otherwise.
	manifest string
	args     []string
	// before are kubectl commands, not shown, that must succeed before the
	// step runs: waits for what it shows (the background scan's results, a
	// ReplicaSet's refused creates).
	before [][]string
	// until are kubectl commands, not shown, run again until their output
	// is the one wanted, before the step runs (what a wait by name cannot
	// express: a report per object, found by label).
	until []poll
	// replicas, when set, stops every podsieve replica ("stop") or starts
	// them again ("start") before the step's command, if any.
	replicas string
	// settled are kubectl commands, not shown, that must succeed after it:
	// waits until the controllers have judged what it applied, so that the
	// next step's decision sees it.
	settled [][]string
}

// poll is a kubectl command and the output it must come to.
type poll struct {
	args []string
	want string
}

// await runs p until it prints p.want, for at most a minute.
func (p poll) await(ctx context.Context, k *utils.Kubectl) error {
	var got string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		out, err := k.Run(ctx, p.args...)
		if got = strings.TrimSpace(out); err == nil && got == p.want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("kubectl %s printed %q for a minute, not %q", strings.Join(p.args, " "), got, p.want)
}

// stagingReportsOf lists the results of one policy in staging's reports,
// one line per object, ordered by its name.
func stagingReportsOf(policy, what string) []string {
	return []string{"get", "polr", "-n", "staging", "-l", "policy.podsieve.dev/" + policy, "--sort-by=.scope.name", "-o",
		`jsonpath={range .items[*]}{.scope.kind}/{.scope.name}: {.results[?(@.policy=="` + policy + `")]` + what + `}{"\n"}{end}`}
}

// developer is the user a developer's steps impersonate.
const developer = "dev"

// run starts a cluster and podsieve in it, walks through the demo's steps,
// and keeps the cluster running until ctx ends unless exitAfter.
func run(ctx context.Context, assets, podsieve string, out io.Writer, exitAfter bool) (err error) {
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	root := testenv.RepoRoot()
	dir, err := os.MkdirTemp("", "podsieve-demo-")
	if err != nil {
		return err
	}
	defer func() {
		// Whatever failed: nothing the demo started outlives it.
		err = errors.Join(err, utils.StopAll())
		if err == nil {
			_ = os.RemoveAll(dir)
		} else {
			err = fmt.Errorf("%w\n(cluster data, kubeconfigs and logs kept in %s)", err, dir)
		}
	}()

	say("==> Starting a cluster built from Go modules: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and kwok running 3 fake nodes (hack/setup-cluster.sh built them)")
	cluster, err := utils.StartCluster(ctx, utils.ClusterOptions{Assets: assets, Dir: dir})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cluster.Stop()) }()
	say("==> Installing podsieve with kubectl apply -k config/default; the manager runs as a local process with its ServiceAccount's token (no container runtime here: see test/e2e/README.md)")
	ps, err := utils.Install(ctx, cluster, utils.InstallOptions{Root: root, Binary: podsieve, Replicas: 1})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ps.Stop()) }()

	admin := cluster.Kubectl()
	admin.Timeout = 2 * time.Minute
	d := &demo{admin: admin, dev: admin.AsUser(developer), ps: ps, out: out, say: say}
	steps, err := walkthrough(root)
	if err != nil {
		return err
	}
	for _, s := range steps {
		if err := d.do(ctx, s); err != nil {
			return err
		}
	}

	if exitAfter {
		return nil
	}
	say("\n==> The cluster keeps running. Try it yourself:\n    export KUBECONFIG=%s\n    alias kubectl=%s\nPress Ctrl-C to stop.",
		cluster.Kubeconfig, filepath.Join(assets, "kubectl"))
	<-ctx.Done()
	return nil
}

// demo is what the walkthrough's steps run with.
type demo struct {
	// admin is the cluster admin's kubectl, dev the developer's.
	admin, dev *utils.Kubectl
	ps         *utils.Podsieve
	out        io.Writer
	say        func(format string, args ...any)
}

// do runs one step: its hidden waits before, its replicas, its command
// shown as a terminal shows it, its hidden waits after.
func (d *demo) do(ctx context.Context, s step) error {
	for _, w := range s.before {
		if _, err := d.admin.Run(ctx, w...); err != nil {
			return fmt.Errorf("before %q: %w", s.title, err)
		}
	}
	for _, p := range s.until {
		if err := p.await(ctx, d.admin); err != nil {
			return fmt.Errorf("before %q: %w", s.title, err)
		}
	}
	d.say("\n==> %s", s.title)
	if err := replicas(ctx, d.ps, s.replicas, d.say); err != nil {
		return fmt.Errorf("%q: %w", s.title, err)
	}
	if s.manifest == "" && len(s.args) == 0 {
		return nil
	}
	if err := d.command(ctx, s); err != nil {
		return err
	}
	for _, w := range s.settled {
		if _, err := d.admin.Run(ctx, w...); err != nil {
			return fmt.Errorf("after %q: %w", s.title, err)
		}
	}
	return nil
}

// command runs the step's kubectl command as its user and prints it with
// its output. A refusal is the step's point, not the demo's failure.
func (d *demo) command(ctx context.Context, s step) error {
	k, as := d.admin, ""
	if s.dev {
		k, as = d.dev, " --as="+developer
	}
	var r utils.Result
	var err error
	if s.manifest != "" {
		d.say("$ kubectl%s apply -f - <<EOF\n%sEOF", as, s.manifest)
		r, err = k.Exec(ctx, s.manifest, "apply", "-f", "-")
	} else {
		d.say("$ kubectl%s %s", as, strings.Join(s.args, " "))
		r, err = k.Exec(ctx, "", s.args...)
	}
	// As a terminal shows them: warnings, then the result.
	fmt.Fprint(d.out, r.Stderr+r.Stdout)
	if err != nil && !errors.As(err, new(*utils.Error)) {
		return err
	}
	return nil
}

// replicas stops every replica of ps ("stop") or starts one again and
// waits until it is ready ("start"), as the demo's steps ask.
func replicas(ctx context.Context, ps *utils.Podsieve, what string, say func(string, ...any)) error {
	switch what {
	case "stop":
		for _, r := range append(ps.Replicas[:0:0], ps.Replicas...) {
			if _, err := ps.Terminate(r, 0, 30*time.Second); err != nil {
				return err
			}
		}
		say("(podsieve's manager processes are stopped: %d replicas run)", len(ps.Replicas))
	case "start":
		r, err := ps.AddReplica(ctx)
		if err != nil {
			return err
		}
		if err := ps.WaitReady(ctx, r, 2*time.Minute); err != nil {
			return err
		}
		say("(podsieve's manager runs again: %d replica ready)", len(ps.Replicas))
	}
	return nil
}

// ready waits until the controllers have written obj's Ready condition
// (true or not) for its current generation: the index has judged it.
func ready(obj string, ns ...string) []string {
	args := []string{"wait", obj, "--for=jsonpath={.status.conditions[0].type}=Ready", "--timeout=60s"}
	return append(args, nsArgs(ns)...)
}

func nsArgs(ns []string) []string {
	if len(ns) == 0 {
		return nil
	}
	return []string{"-n", ns[0]}
}
