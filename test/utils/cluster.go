package utils

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// Loopback is the only address the cluster uses: every component binds to
// it and every URL names it (or "localhost", which /etc/hosts maps to it).
const Loopback = "127.0.0.1"

//go:embed kwok-stages.yaml
var kwokStages []byte

// ClusterOptions says what to start.
type ClusterOptions struct {
	// Assets is the directory hack/setup-cluster.sh prints: etcd,
	// kube-apiserver, kube-controller-manager, kube-scheduler, kwok, kubectl.
	Assets string
	// Dir holds the data directories, certificates, kubeconfigs and logs:
	// a new or empty directory, or a new temporary one when "".
	Dir string
	// Nodes is how many fake nodes kwok runs (default 3).
	Nodes int
	// Timeout bounds the start of each component (default 2 minutes).
	Timeout time.Duration
}

// Cluster is a Kubernetes control plane of real components, built from Go
// modules, with kwok as the node agent of a few fake nodes: pods are
// scheduled and bound as in any cluster, and kwok moves them to Running
// without a container runtime. Everything listens on 127.0.0.1.
type Cluster struct {
	Dir string
	// Kubeconfig is a cluster-admin kubeconfig (group system:masters).
	Kubeconfig string
	// Server is the API server's URL.
	Server string
	// CAFile is the CA the API server's certificate is signed with.
	CAFile string
	Nodes  []string

	assets  string
	etcdURL string
	pki     *pki
	procs   []*Process
	admin   *http.Client
}

// Kubectl returns the built kubectl, as cluster admin.
func (c *Cluster) Kubectl() *Kubectl {
	return &Kubectl{Path: filepath.Join(c.assets, "kubectl"), Kubeconfig: c.Kubeconfig, CacheDir: filepath.Join(c.Dir, "kubectl-cache")}
}

// Processes are the cluster's components, in order of start.
func (c *Cluster) Processes() []*Process { return c.procs }

// StartCluster starts etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, creates the fake nodes and waits until they are
// Ready and the controllers work (the default ServiceAccount exists). On
// error it stops whatever it started.
func StartCluster(ctx context.Context, o ClusterOptions) (c *Cluster, err error) {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	for _, bin := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl"} {
		if _, err := os.Stat(filepath.Join(o.Assets, bin)); err != nil {
			return nil, fmt.Errorf("%s: run hack/setup-cluster.sh and pass the directory it prints: %w", bin, err)
		}
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "podsieve-e2e-"); err != nil {
			return nil, err
		}
	} else if entries, err := os.ReadDir(o.Dir); err == nil && len(entries) > 0 {
		// A cluster starts from nothing: etcd would serve the data of an
		// earlier run.
		return nil, fmt.Errorf("%s is not empty: give a new or empty directory", o.Dir)
	}
	c = &Cluster{Dir: o.Dir, assets: o.Assets}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	for _, d := range []string{"logs", "etcd", "kubeconfig", "kcm", "scheduler", "kwok"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o700); err != nil {
			return c, err
		}
	}
	if c.pki, err = newPKI(filepath.Join(c.Dir, "pki")); err != nil {
		return c, err
	}
	c.CAFile = c.pki.CAFile()
	steps := []struct {
		name  string
		start func(context.Context, time.Duration) error
	}{
		{"etcd", c.startEtcd},
		{"kube-apiserver", c.startAPIServer},
		{"kube-controller-manager", c.startControllerManager},
		{"kube-scheduler", c.startScheduler},
		{"kwok", c.startKwok},
		{"nodes", func(ctx context.Context, t time.Duration) error { return c.createNodes(ctx, o.Nodes, t) }},
	}
	for _, s := range steps {
		if err := s.start(ctx, o.Timeout); err != nil {
			return c, fmt.Errorf("start %s (logs in %s): %w", s.name, filepath.Join(c.Dir, "logs"), err)
		}
	}
	return c, nil
}

// Stop stops every component, newest first, and leaves Dir for reading.
func (c *Cluster) Stop() error {
	err := stopAll(c.procs, 15*time.Second)
	c.procs = nil
	return err
}

func (c *Cluster) start(name string, env []string, args ...string) (*Process, error) {
	p, err := StartProcess(name, filepath.Join(c.Dir, "logs", name+".log"), env, filepath.Join(c.assets, name), args...)
	if err != nil {
		return nil, err
	}
	register(p)
	c.procs = append(c.procs, p)
	return p, nil
}

// waitHealthy polls url until it answers 200, failing early when p exits.
func (c *Cluster) waitHealthy(ctx context.Context, p *Process, client *http.Client, url string, timeout time.Duration) error {
	return poll(ctx, url, 200*time.Millisecond, timeout, func() (bool, error) {
		if err := exitedErr(p); err != nil {
			return false, err
		}
		resp, err := client.Get(url)
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("%s: %s", url, resp.Status)
		}
		return true, nil
	})
}

// exitedErr turns a component's early exit into an error poll stops on.
func exitedErr(p *Process) error {
	exited, err := p.Exited()
	switch {
	case !exited:
		return nil
	case err == nil:
		return fmt.Errorf("%s exited with status 0:\n%s", p.Name, p.Tail(20))
	default:
		return fmt.Errorf("%s exited (%w):\n%s", p.Name, err, p.Tail(20))
	}
}

func (c *Cluster) startEtcd(ctx context.Context, timeout time.Duration) error {
	client, peer := FreePort(), FreePort()
	if client == 0 || peer == 0 {
		return errors.New("no free port on 127.0.0.1")
	}
	clientURL := "http://" + net.JoinHostPort(Loopback, strconv.Itoa(client))
	peerURL := "http://" + net.JoinHostPort(Loopback, strconv.Itoa(peer))
	p, err := c.start("etcd", nil,
		"--name=e2e", "--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL, "--initial-cluster-state=new",
		// A test cluster: losing its data on a crash of the machine is fine.
		"--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return err
	}
	c.etcdURL = clientURL
	return c.waitHealthy(ctx, p, http.DefaultClient, clientURL+"/health", timeout)
}

func (c *Cluster) startAPIServer(ctx context.Context, timeout time.Duration) error {
	port := FreePort()
	if port == 0 {
		return errors.New("no free port on 127.0.0.1")
	}
	c.Server = "https://" + net.JoinHostPort(Loopback, strconv.Itoa(port))
	serving, servingKey, err := c.pki.issue("apiserver", "kube-apiserver", nil,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP(Loopback), net.ParseIP(serviceIP)})
	if err != nil {
		return err
	}
	p, err := c.start("kube-apiserver", nil,
		"--etcd-servers="+c.etcdURL,
		"--bind-address="+Loopback, "--advertise-address="+Loopback, "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.Dir, "pki", "apiserver"),
		"--tls-cert-file="+serving, "--tls-private-key-file="+servingKey,
		"--client-ca-file="+c.pki.CAFile(),
		// Service accounts as in a real cluster: tokens signed by the API
		// server (TokenRequest) and verified against the same key pair.
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+c.pki.path("sa.pub"),
		"--service-account-signing-key-file="+c.pki.path("sa.key"),
		"--service-cluster-ip-range="+serviceCIDR,
		"--authorization-mode=Node,RBAC",
		// The default plugins (NamespaceLifecycle, ServiceAccount, PodSecurity,
		// the admission webhooks, ResourceQuota, ...) and NodeRestriction, as
		// kubeadm enables them.
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--profiling=false")
	if err != nil {
		return err
	}
	admin, adminKey, err := c.pki.issue("admin", "e2e-admin", []string{"system:masters"}, nil, nil)
	if err != nil {
		return err
	}
	if c.Kubeconfig, err = c.writeKubeconfig("admin", admin, adminKey); err != nil {
		return err
	}
	c.admin, err = c.httpClient(admin, adminKey)
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, p, c.admin, c.Server+"/readyz", timeout)
}

// The Service CIDR and the kubernetes Service's address in it: addresses
// the API server allocates and writes in objects, never one that anything
// here dials (there is no kube-proxy, and the webhooks are called by URL).
const (
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
	// podCIDR is where kwok takes the pods' IPs from: written in pod status
	// and EndpointSlices, never dialled.
	podCIDR = "10.244.0.0/16"
)

func (c *Cluster) startControllerManager(ctx context.Context, timeout time.Duration) error {
	kubeconfig, err := c.componentKubeconfig("kube-controller-manager", "system:kube-controller-manager", nil)
	if err != nil {
		return err
	}
	port := FreePort()
	p, err := c.start("kube-controller-manager", nil,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address="+Loopback, "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.Dir, "kcm"),
		"--leader-elect=false",
		"--controllers=*",
		// Each controller acts as its own ServiceAccount in kube-system,
		// with the RBAC the API server bootstraps for it: the controllers
		// need tokens and the token signer as in a real cluster.
		"--use-service-account-credentials",
		"--service-account-private-key-file="+c.pki.path("sa.key"),
		"--root-ca-file="+c.pki.CAFile(),
		"--cluster-signing-cert-file="+c.pki.CAFile(), "--cluster-signing-key-file="+c.pki.path("ca.key"),
		"--cluster-name=podsieve-e2e")
	if err != nil {
		return err
	}
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// kube-controller-manager's own self-signed serving certificate.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // a loopback health check
	}}
	if err := c.waitHealthy(ctx, p, insecure, fmt.Sprintf("https://%s:%d/healthz", Loopback, port), timeout); err != nil {
		return err
	}
	// The serviceaccount controller works: pods can be created in default.
	k := c.Kubectl()
	return poll(ctx, "ServiceAccount default/default", 250*time.Millisecond, timeout, func() (bool, error) {
		if err := exitedErr(p); err != nil {
			return false, err
		}
		_, err := k.Run(ctx, "get", "serviceaccount", "default", "-n", "default")
		return err == nil, err
	})
}

func (c *Cluster) startScheduler(ctx context.Context, timeout time.Duration) error {
	kubeconfig, err := c.componentKubeconfig("kube-scheduler", "system:kube-scheduler", nil)
	if err != nil {
		return err
	}
	port := FreePort()
	p, err := c.start("kube-scheduler", nil,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address="+Loopback, "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.Dir, "scheduler"),
		"--leader-elect=false")
	if err != nil {
		return err
	}
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // a loopback health check
	}}
	return c.waitHealthy(ctx, p, insecure, fmt.Sprintf("https://%s:%d/healthz", Loopback, port), timeout)
}

// kwok is the node agent of every node annotated kwok.x-k8s.io/node=fake.
// It binds no port: without --server-address or --node-port it serves no
// kubelet API (logs, exec), which these tests do not use.
func (c *Cluster) startKwok(_ context.Context, _ time.Duration) error {
	// A node agent with cluster-wide reach (it renews every fake node's
	// Lease and writes every pod's status): system:masters, as kwokctl
	// runs it.
	kubeconfig, err := c.componentKubeconfig("kwok", "kwok-controller", []string{"system:masters"})
	if err != nil {
		return err
	}
	stages := filepath.Join(c.Dir, "kwok", "stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o600); err != nil {
		return err
	}
	_, err = c.start("kwok", []string{
		// kwok reads ~/.kwok/kwok.yaml when it exists; keep it to this run.
		"KWOK_WORKDIR=" + filepath.Join(c.Dir, "kwok"),
	},
		"--kubeconfig="+kubeconfig, "--config="+stages,
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-ip="+Loopback, "--cidr="+podCIDR,
		"--node-lease-duration-seconds=40")
	return err
}

var nodeTemplate = template.Must(template.New("node").Parse(`{{range $i, $n := .}}---
apiVersion: v1
kind: Node
metadata:
  name: {{$n}}
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: {{$n}}
    kubernetes.io/os: linux
    node-role.kubernetes.io/worker: ""
    topology.kubernetes.io/zone: zone-{{$i}}
    type: kwok
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "250"}
  capacity: {cpu: "32", memory: 256Gi, pods: "250"}
{{end}}`))

func (c *Cluster) createNodes(ctx context.Context, n int, timeout time.Duration) error {
	c.Nodes = nil
	for i := range n {
		c.Nodes = append(c.Nodes, fmt.Sprintf("kwok-node-%d", i))
	}
	var b strings.Builder
	if err := nodeTemplate.Execute(&b, c.Nodes); err != nil {
		return err
	}
	k := c.Kubectl()
	if _, err := k.RunStdin(ctx, b.String(), "apply", "-f", "-"); err != nil {
		return err
	}
	_, err := k.Run(ctx, "wait", "--for=condition=Ready", "node", "--all", "--timeout="+timeout.String())
	return err
}

var kubeconfigTemplate = template.Must(template.New("kubeconfig").Parse(`apiVersion: v1
kind: Config
clusters:
- name: podsieve-e2e
  cluster:
    server: {{.Server}}
    certificate-authority: {{.CA}}
users:
- name: {{.User}}
  user:
{{- if .Token}}
    token: {{.Token}}
{{- else}}
    client-certificate: {{.Cert}}
    client-key: {{.Key}}
{{- end}}
contexts:
- name: podsieve-e2e
  context:
    cluster: podsieve-e2e
    user: {{.User}}
current-context: podsieve-e2e
`))

func (c *Cluster) writeKubeconfig(user, cert, key string) (string, error) {
	return c.writeKubeconfigFor(user, map[string]string{"Cert": cert, "Key": key})
}

// WriteTokenKubeconfig writes a kubeconfig that authenticates with a bearer
// token (a ServiceAccount's, from `kubectl create token`) and returns its
// path.
func (c *Cluster) WriteTokenKubeconfig(user, token string) (string, error) {
	return c.writeKubeconfigFor(user, map[string]string{"Token": token})
}

func (c *Cluster) writeKubeconfigFor(user string, creds map[string]string) (string, error) {
	var b strings.Builder
	data := map[string]string{"Server": c.Server, "CA": c.pki.CAFile(), "User": user}
	for k, v := range creds {
		data[k] = v
	}
	if err := kubeconfigTemplate.Execute(&b, data); err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, "kubeconfig", user+".kubeconfig")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

func (c *Cluster) componentKubeconfig(name, user string, groups []string) (string, error) {
	cert, key, err := c.pki.issue(name, user, groups, nil, nil)
	if err != nil {
		return "", err
	}
	return c.writeKubeconfig(name, cert, key)
}

func (c *Cluster) httpClient(cert, key string) (*http.Client, error) {
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(c.pki.CAFile())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	}}, nil
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call, or
// 0 when none is.
func FreePort() int {
	l, err := net.Listen("tcp", net.JoinHostPort(Loopback, "0"))
	if err != nil {
		return 0
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
