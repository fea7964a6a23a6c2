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
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
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

{{- define "netaware.scheduling" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "netaware.probes" -}}
readinessProbe:
  httpGet: {path: /readyz, port: {{ .port }}, scheme: {{ .scheme }}}
  periodSeconds: 5
livenessProbe:
  httpGet: {path: /healthz, port: {{ .port }}, scheme: {{ .scheme }}}
  periodSeconds: 10
  failureThreshold: 3
{{- end -}}

{{/* Who owns the NodeSLOs' spec: the value, else netaware when the chart installs the NodeSLO CRD. */}}
{{- define "netaware.nodeSLOSpecOwner" -}}
{{- .Values.operator.nodeSLOSpecOwner | default (ternary "netaware" "koordinator" .Values.crds.nodeSLO) -}}
{{- end }}

{{/* The extender's KubeSchedulerConfiguration is mounted into the operator when its plans or the rebalancer count
with it ("true" or empty). */}}
{{- define "netaware.planConfig" -}}
{{- if and .Values.extender.enabled (or .Values.operator.appGroupPlans (and .Values.descheduler.enabled .Values.descheduler.rebalance.enabled)) -}}
true
{{- end -}}
{{- end -}}
