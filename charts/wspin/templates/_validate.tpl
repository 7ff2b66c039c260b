{{/*
Render gates. A configuration the processes would refuse at start fails `helm install` instead,
with a message naming the value to fix. values.schema.json checks types and formats; these
checks need more than one value or a message the schema cannot give.
*/}}

{{/* Seconds in a Go duration the schema already accepted ("1h30m", "90s", "0.5h"). */}}
{{- define "wspin.durationSeconds" -}}
{{- $units := dict "ns" 1e-9 "us" 1e-6 "µs" 1e-6 "ms" 1e-3 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" (toString .) -1 -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" . -}}
{{- $total = addf $total (mulf (float64 $number) (get $units (trimPrefix $number .))) -}}
{{- end -}}
{{- $total -}}
{{- end }}

{{/* One artifact: $ = (list "agentdDelivery" .Values.agentdDelivery). */}}
{{- define "wspin.validateDelivery" -}}
{{- $key := index . 0 -}}
{{- $d := index . 1 -}}
{{- if not $d.image -}}
{{- fail (printf "%s.image is mandatory: every workspace pod gets this image volume; set it to a digest-pinned reference (repo@sha256:<64 lowercase hex>)" $key) -}}
{{- end -}}
{{- if not (regexMatch "@sha256:[0-9a-f]{64}$" $d.image) -}}
{{- fail (printf "%s.image must be pinned by digest, ending in @sha256: and 64 lowercase hex (got %q); a tag can move, a digest cannot" $key $d.image) -}}
{{- end -}}
{{- $amd := $d.binarySHA256Amd64 | default "" -}}
{{- $arm := $d.binarySHA256Arm64 | default "" -}}
{{- if or (and $amd (not $arm)) (and $arm (not $amd)) -}}
{{- fail (printf "%s: set BOTH hashes or NEITHER (%s.binarySHA256Amd64 and %s.binarySHA256Arm64); with neither, the pins are read from the image index annotations" $key $key $key) -}}
{{- end -}}
{{- range $field, $value := dict "binarySHA256Amd64" $amd "binarySHA256Arm64" $arm -}}
{{- if and $value (not (regexMatch "^[0-9a-f]{64}$" $value)) -}}
{{- fail (printf "%s.%s must be 64 lowercase hex characters (got %q)" $key $field $value) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{- define "wspin.validate" -}}
{{- include "wspin.validateDelivery" (list "agentdDelivery" .Values.agentdDelivery) -}}
{{- include "wspin.validateDelivery" (list "opencodeDelivery" .Values.opencodeDelivery) -}}
{{- $certs := .Values.certificates -}}
{{- if eq $certs.mode "provided" -}}
{{- if not $certs.secretName -}}
{{- fail "certificates.secretName is required when certificates.mode is provided: name the Secret (keys tls.crt, tls.key) that holds the webhook's serving certificate" -}}
{{- end -}}
{{- if not $certs.caBundle -}}
{{- fail "certificates.caBundle is required when certificates.mode is provided: the base64 PEM of the CA that signed the serving certificate, so the API server trusts the webhook" -}}
{{- end -}}
{{- end -}}
{{- $pdb := .Values.webhook.podDisruptionBudget -}}
{{- if and $pdb.enabled (ge (int $pdb.minAvailable) (int .Values.webhook.replicas)) -}}
{{- fail (printf "webhook.podDisruptionBudget.minAvailable (%d) must be below webhook.replicas (%d): otherwise no node drain can ever evict a webhook pod" (int $pdb.minAvailable) (int .Values.webhook.replicas)) -}}
{{- end -}}
{{- $w := .Values.webhook -}}
{{- if eq (int $w.port) (int $w.metricsPort) -}}
{{- fail (printf "webhook.metricsPort (%d) must differ from webhook.port: the admission and metrics servers cannot share a port" (int $w.metricsPort)) -}}
{{- end -}}
{{- $c := .Values.controller -}}
{{- if eq (int $c.healthPort) (int $c.metricsPort) -}}
{{- fail (printf "controller.metricsPort (%d) must differ from controller.healthPort: the probe and metrics servers cannot share a port" (int $c.metricsPort)) -}}
{{- end -}}
{{- if and (not $c.leaderElection) (gt (int $c.replicas) 1) -}}
{{- fail (printf "controller.leaderElection is required with more than one controller replica (controller.replicas is %d): without the Lease every replica reconciles and sweeps orphan VMs at once" (int $c.replicas)) -}}
{{- end -}}
{{- range $name, $bounds := dict "healthInterval" (list 5.0 600.0 "5s..10m") "statusInterval" (list 15.0 3600.0 "15s..1h") "drainStallBound" (list 60.0 86400.0 "1m..24h") -}}
{{- $given := index $c.workspaces.agent $name -}}
{{- $seconds := float64 (include "wspin.durationSeconds" $given) -}}
{{- if or (lt $seconds (index $bounds 0)) (gt $seconds (index $bounds 1)) -}}
{{- fail (printf "controller.workspaces.agent.%s must be within %s, got %q: the controller refuses to start with any other value" $name (index $bounds 2) $given) -}}
{{- end -}}
{{- end -}}
{{- if $c.relayStaging.enabled -}}
{{- if not $c.internalToken.secretName -}}
{{- fail "controller.internalToken.secretName is required when controller.relayStaging.enabled: relay staging fetches provider credentials from the API with that token (give a Secret name, never the token)" -}}
{{- end -}}
{{- if not $c.apiServiceURL -}}
{{- fail "controller.apiServiceURL is required when controller.relayStaging.enabled: relay staging fetches provider credentials from the API's internal endpoint" -}}
{{- end -}}
{{- $ttl := float64 (include "wspin.durationSeconds" $c.relayStaging.tokenTTL) -}}
{{- if or (lt $ttl 1.0) (gt $ttl 604800.0) -}}
{{- fail (printf "controller.relayStaging.tokenTTL must be within 1s..168h (7 days), got %q: the controller refuses to arm relay staging (exit 85) with any other lifetime" $c.relayStaging.tokenTTL) -}}
{{- end -}}
{{- $bound := float64 (include "wspin.durationSeconds" $c.relayStaging.revocationStalenessBound) -}}
{{- if or (lt $bound 10.0) (gt $bound 3600.0) -}}
{{- fail (printf "controller.relayStaging.revocationStalenessBound must be within 10s..1h, got %q: the controller refuses to start with any other bound" $c.relayStaging.revocationStalenessBound) -}}
{{- end -}}
{{- end -}}
{{- if $c.inferenceRelay.enabled -}}
{{- $a := $c.inferenceRelay.artifact -}}
{{- if not $a.urls -}}
{{- fail "controller.inferenceRelay.artifact.urls needs at least one mirror URL when controller.inferenceRelay.enabled: relay VMs download the relay-proxy binary from it" -}}
{{- end -}}
{{- if not (and $a.sha256Amd64 $a.sha256Arm64) -}}
{{- fail "controller.inferenceRelay.artifact.sha256Amd64 and sha256Arm64 are both required when controller.inferenceRelay.enabled: cloud-init checks the downloaded binary against them" -}}
{{- end -}}
{{- $sweep := $c.inferenceRelay.orphanDetector.sweepInterval -}}
{{- if not (gt (float64 (include "wspin.durationSeconds" $sweep)) 0.0) -}}
{{- fail (printf "controller.inferenceRelay.orphanDetector.sweepInterval must be positive, got %q (e.g. 5m)" $sweep) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.tests.enabled .Values.tests.probeNamespace -}}
{{- $excluded := concat (list "kube-system" .Release.Namespace) .Values.webhook.excludedNamespaces -}}
{{- if has .Values.tests.probeNamespace $excluded -}}
{{- fail (printf "tests.probeNamespace %q is excluded from the pod webhook, so the helm test probe would never be injected; pick a workspace namespace" .Values.tests.probeNamespace) -}}
{{- end -}}
{{- end -}}
{{- end }}
