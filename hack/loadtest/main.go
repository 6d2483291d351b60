// Command loadtest measures the admission webhook end to end: AdmissionReview
// JSON over HTTPS on loopback, answered by podsieve's pod handler inside
// controller-runtime's webhook server, with a synthetic cluster of policies
// and exceptions in the index. It reports throughput and latency
// percentiles and fails when an answer is wrong.
//
//	go run ./hack/loadtest -policies 1000 -exceptions 100000 -namespaces 10000 -duration 20s
//
// With -null it serves a handler that allows everything in the same server,
// the ceiling of what the server, TLS, JSON and the client allow; -compare
// runs that, then podsieve, and reports podsieve's share of the ceiling.
//
//	go run ./hack/loadtest -compare -duration 10s -concurrency 4
//
// With -target it loads a webhook that is already running (a manager in a
// cluster or `make demo`) instead of starting one; the pods it sends are then
// decided by that cluster's policies, so only throughput and latency count.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podsieve/podsieve/internal/synthetic"
	"github.com/podsieve/podsieve/webhooks"
)

func main() {
	var (
		policies    = flag.Int("policies", 1000, "SecurityPolicies in the synthetic cluster")
		exceptions  = flag.Int("exceptions", 100000, "PolicyExceptions in the synthetic cluster")
		namespaces  = flag.Int("namespaces", 10000, "namespaces in the synthetic cluster")
		duration    = flag.Duration("duration", 20*time.Second, "how long to send reviews (each run, with -compare)")
		concurrency = flag.Int("concurrency", 8, "reviews in flight at once")
		target      = flag.String("target", "", "URL of a running /validate-pods webhook (default: start one in-process)")
		insecure    = flag.Bool("insecure", false, "with -target: skip TLS verification")
		null        = flag.Bool("null", false, "serve a handler that allows everything instead of podsieve's, in the same webhook server: the ceiling of the server and client")
		compare     = flag.Bool("compare", false, "run -null, then podsieve, and report podsieve's throughput as a fraction of the null handler's")
		cpuProfile  = flag.String("cpuprofile", "", "write a CPU profile of the whole run (server and client) to this file")
		memProfile  = flag.String("memprofile", "", "write an allocation profile of the whole run to this file at its end")
		rounds      = flag.Int("rounds", 4, "with -compare: alternate the null handler and podsieve this many times, each for duration/rounds")
	)
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	o := options{policies: *policies, exceptions: *exceptions, namespaces: *namespaces, duration: *duration,
		concurrency: *concurrency, target: *target, insecure: *insecure, null: *null, rounds: *rounds}
	var err error
	if *compare {
		err = runCompare(o, os.Stdout)
	} else {
		_, err = run(o, os.Stdout)
	}
	if *memProfile != "" {
		if f, ferr := os.Create(*memProfile); ferr == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			_ = f.Close()
		}
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

type options struct {
	policies, exceptions, namespaces int
	duration                         time.Duration
	concurrency                      int
	target                           string
	insecure                         bool
	// null serves an allow-everything handler instead of podsieve's.
	null bool
	// rounds is how many times -compare alternates the two handlers.
	rounds int
}

// review is one prepared AdmissionReview and the answer it must get.
type review struct {
	kind        string
	body        []byte
	wantAllowed bool
}

// runCompare runs the null handler, then podsieve's, one after the other
// with the same reviews, and reports the ratio of their throughputs.
func runCompare(o options, out io.Writer) error {
	if o.target != "" {
		return fmt.Errorf("-compare starts both servers itself: it cannot be combined with -target")
	}
	// Alternate short runs, so that a neighbour's load on a shared machine
	// falls on both handlers alike; the ratio is of the summed reviews.
	rounds := max(o.rounds, 1)
	o.duration /= time.Duration(rounds)
	var nullSum, sum float64
	for range rounds {
		for _, null := range []bool{true, false} {
			o.null = null
			rate, err := run(o, out)
			if err != nil {
				return err
			}
			if null {
				nullSum += rate
			} else {
				sum += rate
			}
		}
	}
	fmt.Fprintf(out, "podsieve / null handler: %.2f of the null handler's throughput (%d alternating rounds)\n", sum/nullSum, rounds)
	return nil
}

// nullHandler allows everything: what the webhook server, TLS, JSON and the
// client cost without podsieve.
var nullHandler = admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
	return admission.Allowed("")
})

// run sends reviews for o.duration and returns the throughput in reviews/s.
func run(o options, out io.Writer) (float64, error) {
	ctrllog.SetLogger(logr.Discard()) // the webhook server's logs would only slow it down
	cluster := synthetic.New(o.policies, o.exceptions, o.namespaces)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency, ForceAttemptHTTP2: true}}
	target, check := o.target, o.target == "" && !o.null
	name := "podsieve"
	if o.null {
		name = "null handler"
	}
	if target == "" {
		url, stop, err := startServer(o, cluster, client, out)
		if err != nil {
			return 0, err
		}
		defer stop()
		target = url
	} else if o.insecure {
		client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // asked for with -insecure
	}

	reviews, err := prepare(cluster, o.exceptions)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	t := sendAll(client, target, reviews, o, check)
	elapsed := time.Since(start)
	latencies := t.latencies
	slices.Sort(latencies)
	pct := func(p float64) time.Duration { return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))] }
	rate := float64(len(latencies)) / elapsed.Seconds()
	fmt.Fprintf(out, "%s: reviews: %d in %s with %d in flight (mix: clean, refused, exempted)\n", name, len(latencies), elapsed.Round(time.Millisecond), o.concurrency)
	fmt.Fprintf(out, "%s: throughput: %.0f reviews/s\n", name, rate)
	fmt.Fprintf(out, "%s: latency: p50 %s, p90 %s, p99 %s, max %s\n", name, pct(0.50).Round(time.Microsecond), pct(0.90).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), latencies[len(latencies)-1].Round(time.Microsecond))
	if t.failed+t.wrong > 0 {
		return rate, fmt.Errorf("%s: %d failed and %d wrong answers; first: %w", name, t.failed, t.wrong, t.firstErr)
	}
	return rate, nil
}

// startServer serves the pod webhook in process, over TLS as the manager
// does: podsieve's, with an index of the synthetic cluster, or the null
// handler with o.null. It points client at the server and returns the URL
// to send reviews to, and a function that stops the server and removes its
// certificates.
func startServer(o options, cluster *synthetic.Cluster, client *http.Client, out io.Writer) (url string, stop func(), err error) {
	hook := &admission.Webhook{Handler: nullHandler}
	if !o.null {
		start := time.Now()
		ix, err := cluster.Index()
		if err != nil {
			return "", nil, err
		}
		fmt.Fprintf(out, "index: %d policies, %d exceptions, %d namespaces built in %s\n", o.policies, o.exceptions, o.namespaces, time.Since(start).Round(time.Millisecond))
		// The manager's limits (--max-concurrent-reviews and the
		// rest at their defaults): the figures include their cost.
		hook = webhooks.NewPodWebhook(&webhooks.PodAdmission{Index: ix, Clock: clock.RealClock{}})
	}
	dir, err := os.MkdirTemp("", "podsieve-loadtest-")
	if err != nil {
		return "", nil, err
	}
	serverCtx, cancel := context.WithCancel(context.Background())
	stop = func() {
		cancel()
		_ = os.RemoveAll(dir)
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	ca, err := writeServingCert(dir)
	if err != nil {
		return "", nil, err
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	// HTTP/1.1 only, as the manager serves by default (--enable-http2=false).
	http11 := func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
	server := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir, TLSOpts: []func(*tls.Config){http11}})
	server.Register(webhooks.PodsPath, hook)
	go func() { _ = server.Start(serverCtx) }()
	if err := waitStarted(server); err != nil {
		return "", nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	// ?timeout= as the API server sends it (timeoutSeconds: 5).
	return fmt.Sprintf("https://127.0.0.1:%d%s?timeout=5s", port, webhooks.PodsPath), stop, nil
}

// tally is what the senders saw: the latency of every review, the reviews
// that failed and those answered wrongly (checked only when check), and
// the first error.
type tally struct {
	latencies     []time.Duration
	failed, wrong int64
	firstErr      error
}

// sendAll sends the reviews in turn from o.concurrency senders for
// o.duration.
func sendAll(client *http.Client, target string, reviews []review, o options, check bool) tally {
	var (
		mu        sync.Mutex
		latencies []time.Duration
		wrong     atomic.Int64
		failed    atomic.Int64
		firstErr  atomic.Value
	)
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	var wg sync.WaitGroup
	for w := range o.concurrency {
		wg.Go(func() {
			local := make([]time.Duration, 0, 1<<16)
			for i := w; ctx.Err() == nil; i += o.concurrency {
				r := reviews[i%len(reviews)]
				t0 := time.Now()
				allowed, err := send(client, target, r.body)
				local = append(local, time.Since(t0))
				switch {
				case err != nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				case check && allowed != r.wantAllowed:
					wrong.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("a %s pod was answered allowed=%v", r.kind, allowed))
				}
			}
			mu.Lock()
			latencies = append(latencies, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	first, _ := firstErr.Load().(error)
	return tally{latencies: latencies, failed: failed.Load(), wrong: wrong.Load(), firstErr: first}
}

// prepare marshals the load test's rotating mix of reviews
// (synthetic.Cluster.Reviews).
func prepare(c *synthetic.Cluster, exceptions int) ([]review, error) {
	var out []review
	for i, r := range c.Reviews(exceptions) {
		req, err := r.Request(i)
		if err != nil {
			return nil, err
		}
		body, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request:  req,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, review{kind: r.Kind, body: body, wantAllowed: r.Allowed})
	}
	return out, nil
}

func send(client *http.Client, url string, body []byte) (bool, error) {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	defer func() {
		// Read to the end, or the transport drops the connection and the
		// next review pays a TLS handshake: the encoder's trailing newline
		// is left unread by the JSON decoder when a larger answer (a
		// refusal) fills its buffer exactly.
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var ar admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&ar); err != nil {
		return false, err
	}
	if ar.Response == nil {
		return false, fmt.Errorf("a review without a response")
	}
	return ar.Response.Allowed, nil
}
