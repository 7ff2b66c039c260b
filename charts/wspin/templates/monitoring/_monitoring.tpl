{{/*
Label matchers that pick one release's scrape targets. The Prometheus Operator names a
ServiceMonitor's `job` after the Service it scrapes, and `namespace` is the Service's.
*/}}
{{- define "wspin.monitoring.webhookSelector" -}}
job="{{ include "wspin.webhook.name" . }}",namespace="{{ .Release.Namespace }}"
{{- end }}

{{- define "wspin.monitoring.controllerSelector" -}}
job="{{ include "wspin.controller.name" . }}-metrics",namespace="{{ .Release.Namespace }}"
{{- end }}

{{/*
The webhook names kube-apiserver reports in its apiserver_admission_webhook_* metrics (label
`name`), as a regular expression: every webhook the chart registers (configurations.yaml).
*/}}
{{- define "wspin.monitoring.webhookNames" -}}
(pods|workspaces|workspace-owners|tenant-quota)\\.wspin\\.llmsafespaces\\.dev
{{- end }}
