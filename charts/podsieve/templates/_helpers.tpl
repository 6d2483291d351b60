{{/*
Labels on every object. app.kubernetes.io/name is podsieve, as in
config/default, so that selectors written for a kustomize install (a
ServiceMonitor, a NetworkPolicy) keep working.
*/}}
{{- define "podsieve.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: podsieve
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "podsieve.tag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: podsieve
{{- end }}

{{/*
The manager pods' selector. Fixed, and the same as config/default's: a
Deployment's selector cannot change, and the same selector lets a kustomize
install be adopted by the chart.
*/}}
{{- define "podsieve.selectorLabels" -}}
app.kubernetes.io/name: podsieve
app.kubernetes.io/component: manager
{{- end }}

{{- define "podsieve.tag" -}}
{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
The manager's image: by digest when image.digest is set (a released chart
pins the image it was released with), else by tag.
*/}}
{{- define "podsieve.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ include "podsieve.tag" . }}
{{- end -}}
{{- end }}

{{/*
The namespaces the pod webhooks never see: podsieve's own (the release
namespace) and kube-system, always, so that a podsieve outage can never stop
the control plane or podsieve's own repair; then the user's.
*/}}
{{- define "podsieve.excludedNamespaces" -}}
{{- $ns := concat (list "kube-system" .Release.Namespace) .Values.webhooks.excludeNamespaces | uniq -}}
{{ toJson $ns }}
{{- end }}

{{/*
GOMEMLIMIT for the manager: 90% of resources.limits.memory, in MiB, so that
the Go runtime collects harder before the kernel kills the container at the
limit, leaving a tenth for what the Go runtime does not count (stacks of
the OS threads, the binary). Empty when there is no memory limit or when
extraEnv sets GOMEMLIMIT itself. A quantity the chart cannot read fails
rather than guessing.
*/}}
{{- define "podsieve.goMemLimit" -}}
{{- $explicit := false -}}
{{- range .Values.extraEnv -}}
{{- if eq .name "GOMEMLIMIT" -}}{{- $explicit = true -}}{{- end -}}
{{- end -}}
{{- $limits := (.Values.resources | default dict).limits | default dict -}}
{{- $limit := $limits.memory -}}
{{- if and $limit (not $explicit) -}}
{{- $q := $limit -}}
{{- if not (kindIs "string" $limit) -}}{{- $q = printf "%.0f" (float64 $limit) -}}{{- end -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$" $q) -}}
{{- fail (printf "resources.limits.memory %q: the chart derives GOMEMLIMIT from it and reads only a number with an optional suffix Ki, Mi, Gi, Ti, k, M, G or T; write the limit so, or set GOMEMLIMIT yourself in extraEnv" $q) -}}
{{- end -}}
{{- $unit := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 -}}
{{- $bytes := mulf (float64 (regexReplaceAll "[^0-9.].*$" $q "")) (get $unit (regexReplaceAll "^[0-9.]+" $q "")) -}}
{{- printf "%dMiB" (int64 (floor (divf (mulf $bytes 0.9) 1048576.0))) -}}
{{- end -}}
{{- end }}

{{/*
The seconds of a Go duration (backgroundScan.resyncPeriod, which the schema
holds to Go's syntax), as a number.
*/}}
{{- define "podsieve.durationSeconds" -}}
{{- $unit := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "µs" 0.000001 "ns" 0.000000001 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" . -1 -}}
{{- $total = addf $total (mulf (float64 (regexReplaceAll "[^0-9.].*$" . "")) (get $unit (regexReplaceAll "^[0-9.]+" . ""))) -}}
{{- end -}}
{{- $total -}}
{{- end }}

{{/* Seconds as hours, minutes or seconds, whichever is whole, for alert texts. */}}
{{- define "podsieve.humanSeconds" -}}
{{- $s := ceil . | int64 -}}
{{- if eq (mod $s 3600) 0 -}}{{ div $s 3600 }} hours
{{- else if eq (mod $s 60) 0 -}}{{ div $s 60 }} minutes
{{- else -}}{{ $s }} seconds
{{- end -}}
{{- end }}

{{/* The cert-manager Certificate, "namespace/name", for CA injection. */}}
{{- define "podsieve.certificate" -}}
{{ .Release.Namespace }}/podsieve-webhook-cert
{{- end }}

{{/*
A generated object read from files/ (a CRD, the manager's role): its own
metadata with the chart's labels added, and the annotations in .annotations.
*/}}
{{- define "podsieve.fileObject" -}}
{{- $obj := .obj -}}
{{- $meta := $obj.metadata -}}
{{- $_ := set $meta "labels" (merge (dict) (include "podsieve.labels" .root | fromYaml) ($meta.labels | default dict)) -}}
{{- if .annotations -}}
{{- $_ := set $meta "annotations" (merge (dict) .annotations ($meta.annotations | default dict)) -}}
{{- end -}}
{{- if .namespace -}}
{{- $_ := set $meta "namespace" .namespace -}}
{{- end -}}
{{ toYaml $obj }}
{{- end }}

{{/*
What values.schema.json cannot say: checks across values, failing with a
message that names the values and what to change.
*/}}
{{- define "podsieve.validate" -}}
{{- if has .Release.Namespace (list "default" "kube-system" "kube-public" "kube-node-lease") -}}
{{- fail (printf "the release namespace %s is shared: install podsieve into a namespace of its own that only cluster admins may write (helm install -n podsieve-system --create-namespace), because the webhooks never judge it and its PolicyExceptions may reach every namespace" .Release.Namespace) -}}
{{- end -}}
{{- /* Flags the chart sets: extraArgs must not repeat them. */ -}}
{{- $fixed := "the chart sets it for the install to work" -}}
{{- $managed := dict
  "leader-elect" $fixed
  "leader-election-namespace" "the release namespace"
  "exceptions-namespace" "the release namespace"
  "enable-webhooks" $fixed
  "webhook-port" "set ports.webhook instead"
  "webhook-bind-address" "the API server must reach every address of the pod"
  "kubeconfig" "the manager runs on its ServiceAccount"
  "zap-encoder" "the chart logs JSON"
  "webhook-cert-dir" $fixed
  "webhook-namespace" "the release namespace"
  "webhook-service" $fixed
  "webhook-secret" $fixed
  "webhook-configuration" $fixed
  "webhook-dns-names" $fixed
  "cert-rotation" "set certificates.provider instead"
  "metrics-bind-address" "set metrics.enabled and ports.metrics instead"
  "metrics-secure" "the ServiceMonitor scrapes HTTPS"
  "metrics-cert-dir" "set metrics.certSecret instead"
  "health-probe-bind-address" "set ports.health instead"
  "background-scan" "set backgroundScan.enabled instead"
  "background-resync-period" "set backgroundScan.resyncPeriod instead"
  "report-api" "set backgroundScan.reportAPI instead"
  "background-events" "set backgroundScan.events instead"
  "background-report-controlled-pods" "set backgroundScan.reportControlledPods instead"
  "background-writes-per-second" "set backgroundScan.writesPerSecond instead"
  "admission-policies" "set admissionPolicies.enabled instead" -}}
{{- range .Values.extraArgs -}}
{{- $flag := regexReplaceAll "=.*$" (trimPrefix "--" .) "" -}}
{{- if hasKey $managed $flag -}}
{{- fail (printf "extraArgs: remove --%s, which the chart manages (%s)" $flag (get $managed $flag)) -}}
{{- end -}}
{{- end -}}
{{- $envNames := list -}}
{{- range .Values.extraEnv -}}
{{- if eq .name "POD_NAMESPACE" -}}
{{- fail "extraEnv: remove POD_NAMESPACE, which the chart sets from the pod's namespace: the manager takes it for its own namespace, whose PolicyExceptions reach every namespace" -}}
{{- end -}}
{{- if has .name $envNames -}}
{{- fail (printf "extraEnv: %s is set twice; the container would get the last one" .name) -}}
{{- end -}}
{{- $envNames = append $envNames .name -}}
{{- end -}}
{{- range .Values.webhooks.pods.namespaceSelector.matchExpressions -}}
{{- if eq .key "kubernetes.io/metadata.name" -}}
{{- fail "webhooks.pods.namespaceSelector.matchExpressions: leave namespaces out by name with webhooks.excludeNamespaces, which the ValidatingAdmissionPolicies podsieve compiles follow too" -}}
{{- end -}}
{{- if eq .key "podsieve.dev/allow-ignore" -}}
{{- fail "webhooks.pods.namespaceSelector.matchExpressions: podsieve.dev/allow-ignore splits the pod webhooks in two (the opt-out); a term on it would break the split, so choose another label" -}}
{{- end -}}
{{- if and (has .operator (list "In" "NotIn")) (empty .values) -}}
{{- fail (printf "webhooks.pods.namespaceSelector.matchExpressions: %s %s needs values" .key .operator) -}}
{{- end -}}
{{- if and (has .operator (list "Exists" "DoesNotExist")) (not (empty .values)) -}}
{{- fail (printf "webhooks.pods.namespaceSelector.matchExpressions: %s %s takes no values" .key .operator) -}}
{{- end -}}
{{- end -}}
{{- if or (hasKey .Values.webhooks.pods.namespaceSelector.matchLabels "kubernetes.io/metadata.name") (hasKey .Values.webhooks.pods.namespaceSelector.matchLabels "podsieve.dev/allow-ignore") -}}
{{- fail "webhooks.pods.namespaceSelector.matchLabels: kubernetes.io/metadata.name (use webhooks.excludeNamespaces) and podsieve.dev/allow-ignore (the opt-out's) are the chart's" -}}
{{- end -}}
{{- $p := .Values.ports -}}
{{- if or (eq (int $p.webhook) (int $p.metrics)) (eq (int $p.webhook) (int $p.health)) (eq (int $p.metrics) (int $p.health)) -}}
{{- fail (printf "ports: webhook (%v), metrics (%v) and health (%v) must be three different ports" $p.webhook $p.metrics $p.health) -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled: there is nothing to scrape with metrics.enabled=false; turn metrics.enabled on or the ServiceMonitor off" -}}
{{- end -}}
{{- if and .Values.metrics.prometheusRule.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.prometheusRule.enabled: the alerts read podsieve's metrics, and metrics.enabled=false turns them off, so PodsieveDown would always fire; turn metrics.enabled on or the PrometheusRule off" -}}
{{- end -}}
{{- if and .Values.metrics.enabled .Values.metrics.serviceMonitor.enabled (not .Values.metrics.serviceMonitor.insecureSkipVerify) (not .Values.metrics.certSecret) -}}
{{- fail "metrics.serviceMonitor.insecureSkipVerify=false: the manager serves a self-signed metrics certificate unless metrics.certSecret names a Secret with tls.crt, tls.key and ca.crt; set metrics.certSecret, or insecureSkipVerify back to true" -}}
{{- end -}}
{{- if and (eq .Values.certificates.provider "manager") .Values.certificates.certManager.issuerRef.name -}}
{{- fail (printf "certificates.certManager.issuerRef.name (%s) is set but certificates.provider is manager: set certificates.provider=cert-manager to use the issuer" .Values.certificates.certManager.issuerRef.name) -}}
{{- end -}}
{{- end }}
