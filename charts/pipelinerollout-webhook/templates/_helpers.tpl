{{/* The chart's name. */}}
{{- define "prw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The objects' name: the release name when it holds the chart's name. */}}
{{- define "prw.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "prw.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The labels the pods are selected by (the same as the kustomize install's). */}}
{{- define "prw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "prw.name" . }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "prw.labels" -}}
{{ include "prw.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The Secret holding the serving certificate. */}}
{{- define "prw.tlsSecret" -}}
{{- if eq .Values.certificates.mode "existingSecret" -}}
{{- required "certificates.existingSecret.name is required with certificates.mode existingSecret" .Values.certificates.existingSecret.name -}}
{{- else -}}
{{- include "prw.fullname" . }}-tls
{{- end -}}
{{- end -}}

{{/* The webhook's DNS name, as the Service gives it. */}}
{{- define "prw.serviceHost" -}}
{{- printf "%s.%s.svc" (include "prw.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* Every namespace the webhooks skip: the release's own first. */}}
{{- define "prw.skippedNamespaces" -}}
{{- $all := list .Release.Namespace -}}
{{- range .Values.webhook.skippedNamespaces -}}
{{- if not (has . $all) }}{{ $all = append $all . }}{{ end -}}
{{- end -}}
{{- toJson $all -}}
{{- end -}}

{{/*
The image: the registry (when given) and the repository, then the digest
when one is given, else the tag.
*/}}
{{- define "prw.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- $name := .Values.image.repository -}}
{{- with .Values.image.registry }}{{ $name = printf "%s/%s" (trimSuffix "/" .) $name }}{{ end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $name .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $name $tag -}}
{{- end -}}
{{- end -}}

{{/*
The generated CA and serving certificate (certificates.mode genCA), made once
per rendering and shared by the Secret and the webhook configurations.
*/}}
{{- define "prw.genCerts" -}}
{{- if not (hasKey .Values "__generatedCertificates") -}}
{{- $host := include "prw.serviceHost" . -}}
{{- $ca := genCA (printf "%s CA" (include "prw.fullname" .)) (int .Values.certificates.genCA.days) -}}
{{- $cert := genSignedCert $host nil (list $host (printf "%s.cluster.local" $host)) (int .Values.certificates.genCA.days) $ca -}}
{{- $_ := set .Values "__generatedCertificates" (dict "ca" $ca.Cert "cert" $cert.Cert "key" $cert.Key) -}}
{{- end -}}
{{- toJson (get .Values "__generatedCertificates") -}}
{{- end -}}

{{/* The checks no schema can make. */}}
{{- define "prw.validate" -}}
{{- if and .Values.hostNetwork.enabled (or (eq (int .Values.webhook.port) 10250) (eq (int .Values.adminPort) 10250)) -}}
{{- fail "hostNetwork.enabled: webhook.port and adminPort are ports on the node then, and 10250 is the kubelet's: choose another (for example 9443 and 9080)" -}}
{{- end -}}
{{- if eq (int .Values.webhook.port) (int .Values.adminPort) -}}
{{- fail "webhook.port and adminPort must differ" -}}
{{- end -}}
{{- if and (eq .Values.certificates.mode "selfManaged") (not .Values.leaderElection.enabled) (gt (int .Values.replicas) 1) -}}
{{- fail "certificates.mode selfManaged with leaderElection.enabled=false: every replica would run the certificate controller, and they would overwrite each other's certificates; turn leaderElection.enabled on (or run one replica)" -}}
{{- end -}}
{{- if and (eq .Values.certificates.mode "existingSecret") (not .Values.certificates.existingSecret.caBundle) -}}
{{- fail "certificates.existingSecret.caBundle is required with certificates.mode existingSecret: the base64 PEM of the CA that signed the Secret's certificate, so that the API server trusts it" -}}
{{- end -}}
{{- end -}}

{{/*
The accounts the webhooks' matchConditions and the skipped-namespaces
policy name, as CEL literals (JSON: numaplane, numaflow, systemDeleters):
the policy's numaplane.controllerAccount, numaflow.controllerAccount and
forceReapply.deleteUndrained.systemDeleters, else the built-in values of
files/match-conditions.yaml.
*/}}
{{- define "prw.celAccounts" -}}
{{- $builtIn := (.Files.Get "files/match-conditions.yaml" | fromYaml).accounts -}}
{{- $policy := .Values.policy | default dict -}}
{{- $cel := dict -}}
{{- range $key, $value := dict "numaplane" (dig "numaplane" "controllerAccount" $builtIn.numaplane $policy) "numaflow" (dig "numaflow" "controllerAccount" $builtIn.numaflow $policy) -}}
{{- $_ := set $cel $key (printf "'%s'" ($value | toString | replace "\\" "\\\\" | replace "'" "\\'")) -}}
{{- end -}}
{{- $deleters := list -}}
{{- range (dig "forceReapply" "deleteUndrained" "systemDeleters" $builtIn.systemDeleters $policy) -}}
{{- $deleters = append $deleters (printf "'%s'" (. | toString | replace "\\" "\\\\" | replace "'" "\\'")) -}}
{{- end -}}
{{- $_ := set $cel "systemDeleters" (printf "[%s]" (join ", " $deleters)) -}}
{{- toJson $cel -}}
{{- end -}}

{{- /*
The policy the ConfigMap holds, as YAML: the policy value, with
forceReapply.rbac set from forceReapply.rbac. Also what
validating-admission-policy.yaml and mutating-admission-policy.yaml compare
with the policy their admission policies were exported from.
*/ -}}
{{- define "prw.policy" -}}
{{- $policy := deepCopy (.Values.policy | default dict) -}}
{{- $force := get $policy "forceReapply" | default dict -}}
{{- if .Values.forceReapply.rbac.enabled -}}
{{- $rbac := get $force "rbac" | default dict -}}
{{- $_ := set $rbac "verb" .Values.forceReapply.rbac.verb -}}
{{- $_ := set $force "rbac" $rbac -}}
{{- $_ := set $policy "forceReapply" $force -}}
{{- else if hasKey $force "rbac" -}}
{{- fail "policy.forceReapply.rbac is set from forceReapply.rbac: set forceReapply.rbac.enabled instead" -}}
{{- end -}}
{{ toYaml $policy }}
{{- end -}}
