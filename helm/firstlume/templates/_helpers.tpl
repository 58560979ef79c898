{{/* Names, labels and the values several templates share. */}}

{{- define "firstlume.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "firstlume.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 53 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 53 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 53 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "firstlume.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "firstlume.selectorLabels" -}}
app.kubernetes.io/name: {{ include "firstlume.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "firstlume.labels" -}}
helm.sh/chart: {{ include "firstlume.chart" . }}
{{ include "firstlume.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels every executor Job and pod of this installation carries (launchers/manifests.py). */}}
{{- define "firstlume.executorSelectorLabels" -}}
app.kubernetes.io/managed-by: firstlume
app.kubernetes.io/component: executor
firstlume.dev/instance: {{ .Release.Name }}
{{- end }}

{{- define "firstlume.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The namespace of the executor Jobs: its own value, or the release's. */}}
{{- define "firstlume.runNamespace" -}}
{{- default .Release.Namespace .Values.executor.namespace }}
{{- end }}

{{- define "firstlume.controlPlaneServiceAccountName" -}}
{{- default (include "firstlume.fullname" .) .Values.controlPlane.serviceAccount.name }}
{{- end }}

{{- define "firstlume.executorServiceAccountName" -}}
{{- default (printf "%s-executor" (include "firstlume.fullname" .)) .Values.executor.serviceAccount.name }}
{{- end }}

{{/* The Secret with database-url, encryption-keys and, optionally, pubsub-url. */}}
{{- define "firstlume.secretName" -}}
{{- default (include "firstlume.fullname" .) .Values.secret.existingSecret }}
{{- end }}

{{- define "firstlume.publicUrl" -}}
{{- if .Values.controlPlane.publicUrl }}
{{- .Values.controlPlane.publicUrl | trimSuffix "/" }}
{{- else }}
{{- printf "http://%s.%s.svc.cluster.local:%v" (include "firstlume.fullname" .) .Release.Namespace .Values.service.port }}
{{- end }}
{{- end }}

{{/* Hardened pod and container security contexts, shared by every workload of the chart. */}}
{{- define "firstlume.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsUser }}
fsGroup: {{ .Values.runAsUser }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "firstlume.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsUser }}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{- define "firstlume.pullSecretNames" -}}
{{- $names := list }}
{{- range .Values.imagePullSecrets }}
{{- $names = append $names .name }}
{{- end }}
{{- join "," $names }}
{{- end }}

{{- define "firstlume.databaseEnv" -}}
- name: FIRSTLUME_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "firstlume.secretName" . }}
      key: database-url
{{- end }}
