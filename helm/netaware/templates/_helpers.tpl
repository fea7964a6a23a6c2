{{/* Names: <release>-netaware-<component>, cut to 63 characters. */}}
{{- define "netaware.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "netaware.name" -}}
{{- printf "%s-%s" (include "netaware.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "netaware.labels" -}}
app.kubernetes.io/name: netaware
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/component: {{ .component }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "netaware.selector" -}}
app.kubernetes.io/name: netaware
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "netaware.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Non-root, read-only root filesystem, no privilege escalation, every capability dropped. */}}
{{- define "netaware.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "netaware.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/*
Where a component's pods run (Deployments): the component's own nodeSelector, tolerations, affinity and
topologySpreadConstraints, else the chart-wide ones; with neither, replicas spread over nodes and zones
(ScheduleAnyway: a one-node cluster still runs them; counted per revision, so a rollout spreads too), and with
"avoid" COMPONENT and no affinity given, a preferred anti-affinity against that component's pods by node. And the
priority class: the component's, else the chart-wide one. Called with (dict "root" $ "component" NAME "values" V).
*/}}
{{- define "netaware.scheduling" -}}
{{- $root := .root }}
{{- $values := .values | default dict }}
{{- with $values.nodeSelector | default $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations | default $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- $affinity := $values.affinity | default $root.Values.affinity }}
{{- if $affinity }}
affinity:
  {{- toYaml $affinity | nindent 2 }}
{{- else if .avoid }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels: {{- include "netaware.selector" (dict "root" $root "component" .avoid) | nindent 14 }}
{{- end }}
{{- $spread := $values.topologySpreadConstraints }}
{{- if kindIs "invalid" $spread }}
{{- $spread = $root.Values.topologySpreadConstraints }}
{{- end }}
{{- if kindIs "invalid" $spread }}
topologySpreadConstraints:
  {{- range $key := list "kubernetes.io/hostname" "topology.kubernetes.io/zone" }}
  - maxSkew: 1
    topologyKey: {{ $key }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels: {{- include "netaware.selector" (dict "root" $root "component" $.component) | nindent 8 }}
    matchLabelKeys: [pod-template-hash]
  {{- end }}
{{- else if $spread }}
topologySpreadConstraints:
  {{- toYaml $spread | nindent 2 }}
{{- end }}
{{- with $values.priorityClassName | default $root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
A PodDisruptionBudget for a component, only where it can be met: with one replica, minAvailable 1 would block
every node drain (the replica is never evictable), so none is rendered. (dict "root" $ "component" NAME
"replicas" N)
*/}}
{{- define "netaware.pdb" -}}
{{- if and .root.Values.podDisruptionBudget.enabled (gt (int .replicas) 1) }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "netaware.name" . }}
  namespace: {{ .root.Release.Namespace }}
  labels: {{- include "netaware.labels" . | nindent 4 }}
spec:
  {{- with .root.Values.podDisruptionBudget.maxUnavailable }}
  maxUnavailable: {{ . }}
  {{- else }}
  minAvailable: {{ .root.Values.podDisruptionBudget.minAvailable }}
  {{- end }}
  selector:
    matchLabels: {{- include "netaware.selector" . | nindent 6 }}
{{- end }}
{{- end -}}

{{/*
The second scheduler's image: the value, else registry.k8s.io/kube-scheduler at the cluster's own version
(kube-scheduler supports the API server of its own minor version; a managed cluster's suffix, as in
v1.33.5-eks-3025e55, is not part of the upstream image's tag).
*/}}
{{- define "netaware.schedulerImage" -}}
{{- if .Values.secondScheduler.image -}}
{{- .Values.secondScheduler.image -}}
{{- else -}}
{{- printf "%s:%s" .Values.secondScheduler.imageRepository (regexFind `^v?[0-9]+\.[0-9]+\.[0-9]+` .Capabilities.KubeVersion.Version | trimPrefix "v" | printf "v%s") -}}
{{- end -}}
{{- end -}}

{{/*
The probes of a container of the chart. The startup probe holds the liveness probe back until the process first
answers (up to 5 minutes: a saturated node can take tens of seconds to start Python), so a slow start is not killed
as a wedged process; the liveness probe then waits 5 s for an answer (an agent starting on a saturated node was
killed, most likely by the kubelet's default 1 s from its first second). livenessPath (/healthz; kube-scheduler's is
/livez), startupPath (the liveness path) and startupFailures (300, a second apart) may be given: a native sidecar's
startup probe gates its pod's main container.
*/}}
{{- define "netaware.probes" -}}
{{- $liveness := .livenessPath | default "/healthz" -}}
startupProbe:
  httpGet: {path: {{ .startupPath | default $liveness }}, port: {{ .port }}, scheme: {{ .scheme }}}
  periodSeconds: 1
  failureThreshold: {{ .startupFailures | default 300 }}
readinessProbe:
  httpGet: {path: /readyz, port: {{ .port }}, scheme: {{ .scheme }}}
  periodSeconds: 5
livenessProbe:
  httpGet: {path: {{ $liveness }}, port: {{ .port }}, scheme: {{ .scheme }}}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
{{- end -}}

{{/* Who owns the NodeSLOs' spec: the value, else netaware when the chart installs the NodeSLO CRD. */}}
{{- define "netaware.nodeSLOSpecOwner" -}}
{{- .Values.operator.nodeSLOSpecOwner | default (ternary "netaware" "koordinator" .Values.crds.nodeSLO) -}}
{{- end }}

{{/* The extender's KubeSchedulerConfiguration (its plugins' arguments) exists when an extender runs: the Deployment
(extender.enabled) or the second scheduler's own (secondScheduler.enabled). */}}
{{- define "netaware.extenderRuns" -}}
{{- if or .Values.extender.enabled .Values.secondScheduler.enabled -}}
true
{{- end -}}
{{- end -}}

{{/* ... and is mounted into the operator when its plans or the rebalancer count with it ("true" or empty). */}}
{{- define "netaware.planConfig" -}}
{{- if and (include "netaware.extenderRuns" .) (or .Values.operator.appGroupPlans (and .Values.descheduler.enabled .Values.descheduler.rebalance.enabled)) -}}
true
{{- end -}}
{{- end -}}

{{/* The extender's configuration file: it counts bandwidth in the accounting mode kube-scheduler accounts
(bandwidth.accountingMode), and gives a node with no other capacity source the same default as the nodebandwidth
controller. One rendering for the ConfigMap and for the checksum that rolls the pods reading it. */}}
{{- define "netaware.extenderConfig" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - pluginConfig:
      - name: NetworkOverhead
        args:
          namespaces: {{ toJson .Values.extender.networkOverhead.namespaces }}
          networkTopologyName: {{ .Values.extender.networkOverhead.networkTopologyName | quote }}
          weightsName: {{ .Values.extender.networkOverhead.weightsName | quote }}
      - name: NetworkBandwidth
        args:
          accountingMode: {{ .Values.bandwidth.accountingMode }}
          {{- with .Values.bandwidth.defaultNodeBandwidth }}
          defaultNodeBandwidth: {{ . | quote }}
          {{- end }}
{{- end -}}

{{/* The descheduler's policy file (the ConfigMap and the operator's checksum). */}}
{{- define "netaware.deschedulerPolicy" -}}
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: {{ .Values.descheduler.policy.deschedulingInterval }}
dryRun: {{ .Values.descheduler.policy.dryRun }}
maxNoOfPodsToEvictPerNode: {{ .Values.descheduler.policy.maxNoOfPodsToEvictPerNode }}
profiles:
- name: netaware
  plugins:
    balance:
      enabled: [{name: LowNodeLoad}{{ if .Values.descheduler.rebalance.enabled }}, {name: NetworkRebalance}{{ end }}]
  pluginConfig:
  - name: LowNodeLoad
    args:
      lowThresholds: {{ toJson .Values.descheduler.policy.lowThresholds }}
      highThresholds: {{ toJson .Values.descheduler.policy.highThresholds }}
      {{- with .Values.bandwidth.defaultNodeBandwidth }}
      defaultNodeBandwidth: {{ . | quote }}  {{- /* the capacity the scheduler and the nodebandwidth component use */}}
      {{- end }}
      evictableNamespaces:
        exclude: [kube-system, {{ .Release.Namespace }}]
  {{- if .Values.descheduler.rebalance.enabled }}
  - name: NetworkRebalance
    args:
      {{- with .Values.descheduler.rebalance }}
      weights: {networkCost: {{ .weights.networkCost }}, bandwidthBalance: {{ .weights.bandwidthBalance }}}
      minGainPerMove: {{ .minGainPerMove }}
      minGainPerCycle: {{ .minGainPerCycle }}
      cooldown: {{ .cooldown }}
      maxMovesPerCycle: {{ .maxMovesPerCycle }}
      maxMovesPerHour: {{ .maxMovesPerHour }}
      layoutTTL: {{ .layoutTTL }}
      planBudget: {{ .planBudget }}
      breadth: {{ .breadth }}
      {{- end }}
      evictableNamespaces:
        exclude: [kube-system, {{ .Release.Namespace }}]
  {{- end }}
{{- end -}}

{{/* The second scheduler's KubeSchedulerConfiguration: its own profile and Lease, and the extender it calls (the
one in its pod, over loopback; or the extender Deployment's Service over TLS). (dict "root" $ "name" NAME "sidecar"
BOOL "extender" SERVICE) */}}
{{- define "netaware.schedulerConfig" -}}
{{- $values := .root.Values.secondScheduler -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceLock: leases
  resourceNamespace: {{ .root.Release.Namespace }}
  resourceName: {{ .name }}
  leaseDuration: {{ $values.leaderElection.leaseDuration }}
  renewDeadline: {{ $values.leaderElection.renewDeadline }}
  retryPeriod: {{ $values.leaderElection.retryPeriod }}
percentageOfNodesToScore: {{ $values.percentageOfNodesToScore }}
clientConnection:
  qps: {{ $values.clientConnection.qps }}
  burst: {{ $values.clientConnection.burst }}
profiles:
  - schedulerName: {{ $values.name }}
extenders:
  {{- if .sidecar }}
  - urlPrefix: http://127.0.0.1:8888
  {{- else }}
  - urlPrefix: https://{{ .extender }}.{{ .root.Release.Namespace }}.svc:443
  {{- end }}
    filterVerb: filter
    prioritizeVerb: prioritize
    weight: 5
    nodeCacheCapable: true
    ignorable: true
    httpTimeout: {{ $values.httpTimeout }}
    {{- if not .sidecar }}
    tlsConfig:
      caFile: /etc/netaware/extender-ca/ca.crt
    {{- end }}
{{- end -}}

{{/*
A configuration ConfigMap's name: the component's name and the first 10 hex digits of the file's SHA-256. A pod
template names the ConfigMap of its own revision, so a changed file rolls its readers, and a pod of an older template
started during a rollout (a ReplicaSet scaled while another replaces it) never reads a newer file it was not made
for. (dict "root" $ "component" NAME "file" TEXT)
*/}}
{{- define "netaware.configName" -}}
{{- printf "%s-%s" (include "netaware.name" (dict "root" .root "component" .component)) (.file | sha256sum | trunc 10) -}}
{{- end -}}

{{/* "true" when the pods that ask for bandwidth go first to a group of webhook replicas of its own (webhook.first). */}}
{{- define "netaware.webhookFirst" -}}
{{- if and .Values.webhook.enabled (eq .Values.bandwidth.guarantee "resources") (gt (int .Values.webhook.first.replicas) 0) -}}
true
{{- end -}}
{{- end -}}
