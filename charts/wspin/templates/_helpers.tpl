{{/*
Names, labels and shared pod fragments. Delivery and certificate checks live in _validate.tpl.
*/}}

{{- define "wspin.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "wspin.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "wspin.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object names; 52-character stems leave room for the suffixes. */}}
{{- define "wspin.webhook.name" -}}
{{- printf "%s-webhook" (include "wspin.fullname" . | trunc 52 | trimSuffix "-") }}
{{- end }}

{{- define "wspin.controller.name" -}}
{{- printf "%s-controller" (include "wspin.fullname" . | trunc 52 | trimSuffix "-") }}
{{- end }}

{{/* The `helm test` probe's objects (its ServiceAccount is bound by the dry-run-only policy). */}}
{{- define "wspin.test.name" -}}
{{- printf "%s-test" (include "wspin.fullname" . | trunc 52 | trimSuffix "-") }}
{{- end }}

{{/*
The namespace of the `helm test` probe's dry-run pod: tests.probeNamespace, or by default
"default" unless the webhook never sees it (the release lives there, or it is listed in
webhook.excludedNamespaces); "" when no namespace can be chosen, and then the test hook is not
rendered and NOTES.txt says how to name one.
*/}}
{{- define "wspin.test.probeNamespace" -}}
{{- $excluded := concat (list "kube-system" .Release.Namespace) .Values.webhook.excludedNamespaces -}}
{{- if .Values.tests.probeNamespace -}}
{{- .Values.tests.probeNamespace -}}
{{- else if not (has "default" $excluded) -}}
default
{{- end -}}
{{- end }}

{{/* Webhook configurations are cluster scoped: the release namespace keeps two installs apart. */}}
{{- define "wspin.mutatingWebhookName" -}}
{{- printf "%s-%s" (include "wspin.webhook.name" .) .Release.Namespace | trunc 253 }}
{{- end }}

{{- define "wspin.validatingWebhookName" -}}
{{- printf "%s-%s-workspaces" (include "wspin.webhook.name" .) .Release.Namespace | trunc 253 }}
{{- end }}

{{- define "wspin.certSecretName" -}}
{{- default (printf "%s-tls" (include "wspin.webhook.name" .)) .Values.certificates.secretName }}
{{- end }}

{{- define "wspin.labels" -}}
helm.sh/chart: {{ include "wspin.chart" . }}
app.kubernetes.io/name: {{ include "wspin.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: llmsafespaces
{{- end }}

{{- define "wspin.webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wspin.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "wspin.controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wspin.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "wspin.webhook.labels" -}}
{{ include "wspin.labels" . }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "wspin.controller.labels" -}}
{{ include "wspin.labels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{/* The image reference: a digest wins over the tag; the tag defaults to appVersion. */}}
{{- define "wspin.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The numeric user of the image (Dockerfile USER). Numeric so runAsNonRoot can be verified by the
kubelet without reading /etc/passwd from the image.
*/}}
{{- define "wspin.uid" -}}
10001
{{- end }}

{{- define "wspin.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ include "wspin.uid" . }}
runAsGroup: {{ include "wspin.uid" . }}
fsGroup: {{ include "wspin.uid" . }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "wspin.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
From the downward API: POD_NAMESPACE is where both processes keep their Leases and caches;
POD_NAME identifies a replica as a Lease holder.
*/}}
{{- define "wspin.podEnv" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}

{{/* The namespaces the pod webhook never sees (kube-system, the release namespace and
webhook.excludedNamespaces), comma-separated: the webhook's namespaceSelector, the Workspace
validator and the controller all take this one list. */}}
{{- define "wspin.excludedNamespaces" -}}
{{- $own := ternary (list) (list .Release.Namespace) (eq .Values.workspaces.namespace .Release.Namespace) -}}
{{- concat (list "kube-system") $own .Values.webhook.excludedNamespaces | uniq | join "," }}
{{- end }}

{{- /* workspaces.trustedWriters plus the controller's service account (its finalizer and
spec.suspend writes, and its requests for the owner record on upgrade), comma-separated:
--trusted-workspace-writers of both processes. */}}
{{- define "wspin.trustedWriters" -}}
{{- $controller := printf "system:serviceaccount:%s:%s" .Release.Namespace (include "wspin.controller.name" .) -}}
{{- concat .Values.workspaces.trustedWriters (list $controller) | uniq | join "," }}
{{- end }}

{{- /* The egress policy kind workspace pods get: auto picks Cilium when its CRD is served. */}}
{{- define "wspin.egressMode" -}}
{{- $mode := .Values.controller.workspaces.egress.mode -}}
{{- if eq $mode "auto" -}}
{{- ternary "cilium" "networkpolicy" (.Capabilities.APIVersions.Has "cilium.io/v2/CiliumNetworkPolicy") -}}
{{- else -}}
{{- $mode -}}
{{- end -}}
{{- end }}
