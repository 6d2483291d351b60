//go:build e2e

package e2e

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// istioDeployment is a Deployment as Istio's injector (1.24) leaves it:
// istio-init, from docker.io/istio/proxyv2, runs as root and adds NET_ADMIN
// and NET_RAW to program iptables; istio-proxy runs beside the app, as a
// container (classic injection) or as an init container with
// restartPolicy: Always (native sidecar mode).
func istioDeployment(ns, name string, native bool) string {
	proxy := `
      - name: istio-proxy
        image: docker.io/istio/proxyv2:1.24.0
        args: [proxy, sidecar, --domain, $(POD_NAMESPACE).svc.cluster.local, --proxyLogLevel=warning]
        env:
        - name: POD_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        ports:
        - {containerPort: 15090, name: http-envoy-prom, protocol: TCP}
        securityContext:
          allowPrivilegeEscalation: false
          capabilities: {drop: [ALL]}
          privileged: false
          readOnlyRootFilesystem: true
          runAsGroup: 1337
          runAsNonRoot: true
          runAsUser: 1337
        volumeMounts:
        - {name: istio-envoy, mountPath: /etc/istio/proxy}
        - {name: istio-data, mountPath: /var/lib/istio/data}
        - {name: istio-podinfo, mountPath: /etc/istio/pod}
        - {name: istio-token, mountPath: /var/run/secrets/tokens}
        - {name: istiod-ca-cert, mountPath: /var/run/secrets/istio}`
	sidecarInit, sidecar := "", proxy
	if native {
		sidecarInit = strings.Replace(proxy, "        image: docker.io/istio/proxyv2:1.24.0",
			"        image: docker.io/istio/proxyv2:1.24.0\n        restartPolicy: Always", 1)
		sidecar = ""
	}
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
  namespace: ` + ns + `
spec:
  replicas: 2
  selector:
    matchLabels: {app: ` + name + `}
  template:
    metadata:
      labels: {app: ` + name + `, security.istio.io/tlsMode: istio, service.istio.io/canonical-name: ` + name + `}
      annotations:
        sidecar.istio.io/status: '{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["istio-envoy","istio-data","istio-podinfo","istio-token","istiod-ca-cert"]}'
        kubectl.kubernetes.io/default-container: app
    spec:
      initContainers:
      - name: istio-init
        image: docker.io/istio/proxyv2:1.24.0
        args: [istio-iptables, -p, "15001", -z, "15006", -u, "1337", -m, REDIRECT, -i, "*", -x, "", -b, "*", -d, "15090,15021,15020", --log_output_level=default:info]
        securityContext:
          allowPrivilegeEscalation: false
          capabilities:
            add: [NET_ADMIN, NET_RAW]
            drop: [ALL]
          privileged: false
          readOnlyRootFilesystem: false
          runAsGroup: 0
          runAsNonRoot: false
          runAsUser: 0` + sidecarInit + `
      containers:
      - name: app
        image: docker.io/library/nginx:1.27
        ports: [{containerPort: 80}]` + sidecar + `
      volumes:
      - {name: istio-envoy, emptyDir: {medium: Memory}}
      - {name: istio-data, emptyDir: {}}
      - name: istio-podinfo
        downwardAPI:
          items:
          - {path: labels, fieldRef: {fieldPath: metadata.labels}}
          - {path: annotations, fieldRef: {fieldPath: metadata.annotations}}
      - name: istio-token
        projected:
          sources:
          - serviceAccountToken: {audience: istio-ca, expirationSeconds: 43200, path: istio-token}
      - name: istiod-ca-cert
        configMap: {name: istio-ca-root-cert, optional: true}
`
}

// linkerdDeployment is a Deployment as Linkerd's proxy injector (2.14)
// leaves it: linkerd-init, from cr.l5d.io/linkerd/proxy-init, adds NET_ADMIN
// and NET_RAW (as a non-root user); linkerd-proxy runs beside the app, as a
// container or, with config.alpha.linkerd.io/proxy-enable-native-sidecar,
// as an init container with restartPolicy: Always after linkerd-init.
func linkerdDeployment(ns, name string, native bool) string {
	proxy := `
      - name: linkerd-proxy
        image: cr.l5d.io/linkerd/proxy:stable-2.14.10
        env:
        - {name: LINKERD2_PROXY_LOG, value: "warn,linkerd=info"}
        - {name: LINKERD2_PROXY_INBOUND_LISTEN_ADDR, value: "0.0.0.0:4143"}
        ports:
        - {containerPort: 4143, name: linkerd-proxy}
        - {containerPort: 4191, name: linkerd-admin}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          runAsNonRoot: true
          runAsUser: 2102
          seccompProfile: {type: RuntimeDefault}
        volumeMounts:
        - {name: linkerd-identity-end-entity, mountPath: /var/run/linkerd/identity/end-entity}
        - {name: linkerd-identity-token, mountPath: /var/run/secrets/tokens}`
	sidecarInit, sidecar, annotation := "", proxy, ""
	if native {
		sidecarInit = strings.Replace(proxy, "        image: cr.l5d.io/linkerd/proxy:stable-2.14.10",
			"        image: cr.l5d.io/linkerd/proxy:stable-2.14.10\n        restartPolicy: Always", 1)
		sidecar = ""
		annotation = "\n        config.alpha.linkerd.io/proxy-enable-native-sidecar: \"true\""
	}
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
  namespace: ` + ns + `
spec:
  replicas: 2
  selector:
    matchLabels: {app: ` + name + `}
  template:
    metadata:
      labels: {app: ` + name + `, linkerd.io/control-plane-ns: linkerd, linkerd.io/proxy-deployment: ` + name + `}
      annotations:
        linkerd.io/inject: enabled
        linkerd.io/created-by: linkerd/proxy-injector stable-2.14.10` + annotation + `
    spec:
      initContainers:
      - name: linkerd-init
        image: cr.l5d.io/linkerd/proxy-init:v2.2.3
        args: [--incoming-proxy-port, "4143", --outgoing-proxy-port, "4140", --proxy-uid, "2102", --inbound-ports-to-ignore, "4190,4191,4567,4568", --outbound-ports-to-ignore, "4567,4568"]
        securityContext:
          allowPrivilegeEscalation: false
          capabilities:
            add: [NET_ADMIN, NET_RAW]
          privileged: false
          readOnlyRootFilesystem: true
          runAsGroup: 65534
          runAsNonRoot: true
          runAsUser: 65534
          seccompProfile: {type: RuntimeDefault}
        volumeMounts:
        - {name: linkerd-proxy-init-xtables-lock, mountPath: /run}` + sidecarInit + `
      containers:
      - name: app
        image: docker.io/library/nginx:1.27
        ports: [{containerPort: 80}]` + sidecar + `
      volumes:
      - {name: linkerd-proxy-init-xtables-lock, emptyDir: {}}
      - {name: linkerd-identity-end-entity, emptyDir: {medium: Memory}}
      - name: linkerd-identity-token
        projected:
          sources:
          - serviceAccountToken: {audience: identity.l5d.io, expirationSeconds: 86400, path: linkerd-identity-token}
`
}

// netAdminDeployment's app container adds NET_ADMIN: what baseline forbids
// and the policy's mesh exclusion does not cover.
func netAdminDeployment(ns, name string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  replicas: 1
  selector:
    matchLabels: {app: ` + name + `}
  template:
    metadata:
      labels: {app: ` + name + `}
    spec:
      containers:
      - name: app
        image: docker.io/library/nginx:1.27
        securityContext:
          capabilities: {add: [NET_ADMIN]}
`
}

// podPhases lists the phases of the pods with label app=name.
func podPhases(ctx SpecContext, ns, app string) []string {
	GinkgoHelper()
	return strings.Fields(run(ctx, "get", "pods", "-n", ns, "-l", "app="+app, "-o", "jsonpath={.items[*].status.phase}"))
}

// missionSpecs are the specs of "The mission, through the controllers".
func missionSpecs() {
	DescribeTable("a mesh-injected Deployment rolls out to Running pods under the baseline mesh policy",
		func(ctx SpecContext, name string, manifest func(ns, name string, native bool) string, native bool) {
			reviewed := metricSum(ctx, "podsieve_admission_requests_total", `kind="Pod"`, `operation="CREATE"`, `decision="allow"`)
			out := apply(ctx, manifest("staging", name, native))
			Expect(out).To(ContainSubstring("deployment.apps/" + name + " created"))
			run(ctx, "rollout", "status", "deployment/"+name, "-n", "staging", "--timeout=90s")
			Expect(podPhases(ctx, "staging", name)).To(Equal([]string{"Running", "Running"}))
			// Scheduled by kube-scheduler onto kwok's fake nodes.
			nodes := run(ctx, "get", "pods", "-n", "staging", "-l", "app="+name, "-o", "jsonpath={.items[*].spec.nodeName}")
			for _, n := range strings.Fields(nodes) {
				Expect(cluster.Nodes).To(ContainElement(n))
			}
			// The ReplicaSet controller's pod creates went through podsieve,
			// which admitted them.
			Expect(metricSum(ctx, "podsieve_admission_requests_total", `kind="Pod"`, `operation="CREATE"`, `decision="allow"`)).
				To(BeNumerically(">=", reviewed+2))
		},
		Entry("Istio, classic sidecar", "web-istio", istioDeployment, false, SpecTimeout(2*time.Minute)),
		Entry("Istio, native sidecar", "web-istio-native", istioDeployment, true, SpecTimeout(2*time.Minute)),
		Entry("Linkerd, classic sidecar", "web-linkerd", linkerdDeployment, false, SpecTimeout(2*time.Minute)),
		Entry("Linkerd, native sidecar", "web-linkerd-native", linkerdDeployment, true, SpecTimeout(2*time.Minute)),
	)

	It("refuses at kubectl apply a Deployment whose app container adds NET_ADMIN, with podsieve's message", func(ctx SpecContext) {
		ns := newNamespace(ctx, "mission")
		_, err := kubectl.RunStdin(ctx, netAdminDeployment(ns, "net-tool"), "apply", "-f", "-")
		Expect(err).To(HaveOccurred())
		msg := kubectlStderr(err)
		Expect(msg).To(MatchRegexp(podsieveRefusal.String()))
		Expect(msg).To(ContainSubstring(`Deployment ` + ns + `/net-tool is refused by SecurityPolicy "pod-security-standards" rule "baseline-service-mesh"`))
		Expect(msg).To(ContainSubstring("NET_ADMIN"))
		AddReportEntry("what the user reads", msg)
		// Nothing was created: no Deployment, so no ReplicaSet and no pod.
		Expect(run(ctx, "get", "deploy,rs,pods", "-n", ns, "-o", "name")).To(BeEmpty())
	}, SpecTimeout(time.Minute))

	It("judges a DaemonSet on the fake nodes: a compliant one runs a pod on each node, one on the host's network is refused", func(ctx SpecContext) {
		ns := newNamespace(ctx, "daemons")
		apply(ctx, `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-agent, namespace: `+ns+`}
spec:
  selector:
    matchLabels: {app: node-agent}
  template:
    metadata:
      labels: {app: node-agent}
    spec:
      containers:
      - name: agent
        image: docker.io/library/busybox:1.36
        command: [sleep, infinity]
`)
		run(ctx, "rollout", "status", "daemonset/node-agent", "-n", ns, "--timeout=90s")
		Expect(podPhases(ctx, ns, "node-agent")).To(Equal([]string{"Running", "Running", "Running"}))
		nodes := strings.Fields(run(ctx, "get", "pods", "-n", ns, "-l", "app=node-agent", "-o", "jsonpath={.items[*].spec.nodeName}"))
		Expect(nodes).To(ConsistOf(cluster.Nodes))

		_, err := kubectl.RunStdin(ctx, `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: host-agent, namespace: `+ns+`}
spec:
  selector:
    matchLabels: {app: host-agent}
  template:
    metadata:
      labels: {app: host-agent}
    spec:
      hostNetwork: true
      containers:
      - name: agent
        image: docker.io/library/busybox:1.36
        command: [sleep, infinity]
`, "apply", "-f", "-")
		Expect(err).To(HaveOccurred())
		msg := kubectlStderr(err)
		Expect(msg).To(ContainSubstring(`DaemonSet ` + ns + `/host-agent is refused by SecurityPolicy "pod-security-standards" rule "baseline-service-mesh"`))
		Expect(msg).To(ContainSubstring("Host Namespaces"))
	}, SpecTimeout(2*time.Minute))

	It("judges the CronJob → Job → Pod chain: the CronJob controller's Job and the Job controller's pod are admitted and the pod completes", func(ctx SpecContext) {
		ns := newNamespace(ctx, "cron")
		jobs := metricSum(ctx, "podsieve_admission_requests_total", `kind="Job"`, `operation="CREATE"`, `decision="allow"`)
		apply(ctx, `apiVersion: batch/v1
kind: CronJob
metadata: {name: backup, namespace: `+ns+`}
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        metadata:
          labels: {app: backup}
        spec:
          restartPolicy: Never
          containers:
          - name: backup
            image: docker.io/library/busybox:1.36
            command: [sh, -c, "echo done"]
`)
		// The next minute's run: the CronJob controller creates the Job, the
		// Job controller its pod, kwok runs it to completion.
		run(ctx, "wait", "cronjob/backup", "-n", ns, "--for=jsonpath={.status.lastSuccessfulTime}", "--timeout=100s")
		Expect(strings.Fields(run(ctx, "get", "pods", "-n", ns, "-l", "app=backup", "-o", "jsonpath={.items[*].status.phase}"))).
			To(ContainElement("Succeeded"))
		Expect(metricSum(ctx, "podsieve_admission_requests_total", `kind="Job"`, `operation="CREATE"`, `decision="allow"`)).
			To(BeNumerically(">", jobs))

		_, err := kubectl.RunStdin(ctx, `apiVersion: batch/v1
kind: CronJob
metadata: {name: privileged-backup, namespace: `+ns+`}
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: backup
            image: docker.io/library/busybox:1.36
            securityContext: {privileged: true}
`, "apply", "-f", "-")
		Expect(err).To(HaveOccurred())
		Expect(kubectlStderr(err)).To(ContainSubstring(`CronJob ` + ns + `/privileged-backup is refused by SecurityPolicy "pod-security-standards"`))
	}, SpecTimeout(3*time.Minute))

	It("refuses kubectl debug with a privileged ephemeral container, and admits the baseline debug profile", func(ctx SpecContext) {
		ns := newNamespace(ctx, "debug")
		apply(ctx, plainDeployment(ns, "web", 1))
		run(ctx, "rollout", "status", "deployment/web", "-n", ns, "--timeout=90s")
		pod := strings.TrimSpace(run(ctx, "get", "pods", "-n", ns, "-l", "app=web", "-o", "jsonpath={.items[0].metadata.name}"))

		_, err := kubectl.Run(ctx, "debug", "-n", ns, "pod/"+pod, "--image=docker.io/library/busybox:1.36", "--profile=sysadmin", "--container=sysadmin")
		Expect(err).To(HaveOccurred())
		msg := kubectlStderr(err)
		Expect(msg).To(MatchRegexp(podsieveRefusal.String()))
		Expect(msg).To(ContainSubstring("Privileged Containers"))
		Expect(msg).To(ContainSubstring(`ephemeral container "sysadmin"`))
		AddReportEntry("kubectl debug --profile=sysadmin", msg)

		run(ctx, "debug", "-n", ns, "pod/"+pod, "--image=docker.io/library/busybox:1.36", "--profile=baseline", "--container=baseline")
		Expect(run(ctx, "get", "pod", pod, "-n", ns, "-o", "jsonpath={.spec.ephemeralContainers[*].name}")).To(Equal("baseline"))
	}, SpecTimeout(2*time.Minute))
}
