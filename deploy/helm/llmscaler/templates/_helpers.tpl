{{/*
Labels of every object: the kustomize base's part-of label and Helm's own. The object's name
label is not among them: the default ConfigMaps keep WVA's (app.kubernetes.io/name:
workload-variant-autoscaler), by which the controller finds them.
*/}}
{{- define "llmscaler.labels" -}}
app.kubernetes.io/part-of: llmscaler
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/*
The controller pods' labels, which every selector (Deployment, Service, PDB, ServiceMonitor,
anti-affinity) uses: the base's, fixed so that an upgrade never changes a Deployment's
immutable selector.
*/}}
{{- define "llmscaler.selectorLabels" -}}
app.kubernetes.io/name: llmscaler
app.kubernetes.io/component: controller
{{- end }}

{{- define "llmscaler.controllerLabels" -}}
{{ include "llmscaler.selectorLabels" . }}
{{ include "llmscaler.labels" . }}
{{- end }}

{{/* The image reference: a digest pins it, else the tag (the appVersion by default). */}}
{{- define "llmscaler.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}:{{ $tag }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end }}

{{/* ACTUATION_MODE from the `actuation` value: `scale` is the controller's `direct`. */}}
{{- define "llmscaler.actuationMode" -}}
{{- if eq .Values.actuation "scale" -}}direct{{- else -}}{{ .Values.actuation }}{{- end -}}
{{- end }}
