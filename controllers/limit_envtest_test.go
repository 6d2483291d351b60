package controllers_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/podsieve/podsieve/api/v1alpha1"
	"github.com/podsieve/podsieve/controllers"
	"github.com/podsieve/podsieve/controllers/background"
	"github.com/podsieve/podsieve/internal/index"
	"github.com/podsieve/podsieve/internal/testenv"
)

// TestParallelCreatesBeyondLimit: 200 PolicyExceptions created at once in
// a namespace whose limit is 5, as when the webhook's count lags (it counts
// what the index holds) or the webhook is down. On both replicas, the index
// ends up holding exactly the 5 oldest (by creationTimestamp, then name),
// in force; the other 195 are held by neither and are Ready=False,
// LimitExceeded, with a message that says so. Its own control plane: the
// suite's manager sets no limit and would write Ready on every one.
func TestParallelCreatesBeyondLimit(t *testing.T) {
	const (
		limit   = 5
		created = 200
	)
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// A client as fast as many clients: client-go's default of 5 requests
	// a second would spread the creations over 40 seconds.
	fast := rest.CopyConfig(cfg)
	fast.QPS, fast.Burst = 1000, 1000
	c, err := client.New(fast, client.Options{Scheme: testenv.Scheme()})
	must(t, err)

	policy := &policyv1alpha1.SecurityPolicy{ObjectMeta: metav1.ObjectMeta{Name: "baseline"}}
	must(t, yaml.UnmarshalStrict([]byte("exceptions: {}\nrules: [{name: baseline, podSecurity: {level: baseline}}]"), &policy.Spec))
	must(t, c.Create(ctx, policy))
	const ns = "crowded"
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	// Two replicas, each judging and writing status on its own (no leader
	// election): they must agree.
	var replicas []*index.Index
	for range 2 {
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:                 testenv.Scheme(),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Cache:                  controllers.CacheOptions(),
			Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		})
		must(t, err)
		ix, err := controllers.Setup(ctx, mgr, controllers.Options{
			ExceptionsNamespace:       "podsieve-system",
			Background:                background.Options{Disabled: true},
			MaxExceptionsPerNamespace: limit,
		})
		must(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := mgr.Start(ctx); err != nil {
				t.Errorf("manager: %v", err)
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
		replicas = append(replicas, ix)
	}
	for _, ix := range replicas {
		must(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true,
			func(context.Context) (bool, error) { return ix.Ready(), nil }))
	}

	var wg sync.WaitGroup
	errs := make(chan error, created)
	for i := range created {
		wg.Go(func() {
			pe := &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("e-%03d", (i*37)%created)}}
			if err := yaml.UnmarshalStrict([]byte(`exceptions: [{policyName: baseline, ruleNames: ["*"]}]
podSecurity: [{controlName: Host Ports, restrictedField: "spec.containers[*].ports[*].hostPort", values: ["9100"]}]`), &pe.Spec); err != nil {
				errs <- err
				return
			}
			errs <- c.Create(ctx, pe)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err) // nothing refuses them: there is no webhook here
	}

	// The winners, by the documented order, from what the API server holds.
	var list policyv1alpha1.PolicyExceptionList
	must(t, c.List(ctx, &list, client.InNamespace(ns)))
	slices.SortFunc(list.Items, func(a, b policyv1alpha1.PolicyException) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	var oldest []string
	for _, pe := range list.Items[:limit] {
		oldest = append(oldest, pe.Name)
	}
	t.Logf("created over %s; the %d oldest: %v", list.Items[created-1].CreationTimestamp.Sub(list.Items[0].CreationTimestamp.Time), limit, oldest)

	settled := func() string {
		for r, ix := range replicas {
			s := ix.Snapshot()
			if n := s.ExceptionsIn(ns); n != limit {
				return fmt.Sprintf("replica %d holds %d exceptions of the namespace, want %d", r, n, limit)
			}
			for _, pe := range list.Items {
				held, inForce := s.Held(ns, pe.Name) != nil, s.Exception(ns, pe.Name) != nil
				if want := slices.Contains(oldest, pe.Name); held != want || inForce != want {
					return fmt.Sprintf("replica %d: %s held %v, in force %v; want %v", r, pe.Name, held, inForce, want)
				}
			}
		}
		var now policyv1alpha1.PolicyExceptionList
		if err := c.List(ctx, &now, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		for _, pe := range now.Items {
			cond := meta.FindStatusCondition(pe.Status.Conditions, policyv1alpha1.ConditionReady)
			if cond == nil || cond.ObservedGeneration != pe.Generation {
				return pe.Name + " is not judged yet"
			}
			if slices.Contains(oldest, pe.Name) {
				if cond.Status != metav1.ConditionTrue || cond.Reason != policyv1alpha1.ReasonActive {
					return fmt.Sprintf("%s, among the %d oldest: %s %s: %s", pe.Name, limit, cond.Status, cond.Reason, cond.Message)
				}
				continue
			}
			want := fmt.Sprintf("namespace %q holds %d PolicyExceptions, more than the limit of %d", ns, created, limit)
			if cond.Status != metav1.ConditionFalse || cond.Reason != policyv1alpha1.ReasonLimitExceeded || !strings.Contains(cond.Message, want) {
				return fmt.Sprintf("%s, beyond the limit: %s %s: %q, want LimitExceeded saying %q", pe.Name, cond.Status, cond.Reason, cond.Message, want)
			}
		}
		return ""
	}
	var last string
	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		last = settled()
		return last == "", nil
	}); err != nil {
		t.Fatalf("not settled after 2 minutes: %s", last)
	}
	t.Logf("settled %s after the last creation", time.Since(start).Round(100*time.Millisecond))
	t.Run("the ResourceQuota of docs/operations.md", func(t *testing.T) { quotaHolds(ctx, t, c) })

	// And it stays so for a while: neither replica moves an exception back
	// across.
	for range 8 {
		if msg := settled(); msg != "" {
			t.Fatalf("after settling: %s", msg)
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// quotaHolds: the ResourceQuota that docs/operations.md shows, with a hard
// count of 5, lets exactly 5 of 50 creations through, 49 of them sent at
// once. envtest
// runs no kube-controller-manager, whose quota controller fills in a new
// quota's status; the test writes that status as it would.
func quotaHolds(ctx context.Context, t *testing.T, c client.Client) {
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "operations.md"))
	must(t, err)
	var quota corev1.ResourceQuota
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		if y, _, _ := strings.Cut(block, "```"); strings.Contains(y, "kind: ResourceQuota") {
			must(t, yaml.UnmarshalStrict([]byte(y), &quota))
		}
	}
	const resource = corev1.ResourceName("count/policyexceptions.policy.podsieve.dev")
	if _, ok := quota.Spec.Hard[resource]; !ok {
		t.Fatalf("docs/operations.md shows no ResourceQuota on %s: %+v", resource, quota.Spec.Hard)
	}
	const ns = "quota"
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	quota.Namespace = ns
	quota.Spec.Hard[resource] = apiresource.MustParse("5")
	must(t, c.Create(ctx, &quota))
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{resource: apiresource.MustParse("0")}}
	must(t, c.Status().Update(ctx, &quota))

	newException := func(name string) *policyv1alpha1.PolicyException {
		return &policyv1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: policyv1alpha1.PolicyExceptionSpec{Exceptions: []policyv1alpha1.ExceptionTarget{{PolicyName: "baseline", RuleNames: []string{"*"}}}}}
	}
	// The API server's quota admission reads quotas through an informer:
	// until it has the status, it refuses with "status unknown for quota";
	// until it has the quota at all, it admits without counting. So the
	// first exception is created until the quota counts it (one that was
	// not counted is deleted: no quota controller runs here to recount).
	must(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		first := newException("q-first")
		err := c.Create(ctx, first)
		if err != nil && strings.Contains(err.Error(), "status unknown for quota") {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		var counted corev1.ResourceQuota
		if err := c.Get(ctx, client.ObjectKeyFromObject(&quota), &counted); err != nil {
			return false, err
		}
		if used := counted.Status.Used[resource]; used.Value() == 1 {
			return true, nil
		}
		return false, c.Delete(ctx, first)
	}))

	var wg sync.WaitGroup
	var mu sync.Mutex
	createdN, refused := 1, 0
	for i := range 49 {
		wg.Go(func() {
			pe := newException(fmt.Sprintf("q-%02d", i))
			err := c.Create(ctx, pe)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				createdN++
			case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
				refused++
			default:
				t.Errorf("create %s: %v", pe.Name, err)
			}
		})
	}
	wg.Wait()
	if createdN != 5 || refused != 45 {
		t.Errorf("%d of 50 created, %d refused by the quota; want 5 and 45", createdN, refused)
	}
}
