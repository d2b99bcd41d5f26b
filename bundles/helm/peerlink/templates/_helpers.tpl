{{/*
Generated from the bundles (bundles/install, bundles/monitoring) by package
bundles/helmchart: edit the bundle, then run `make generate`.
*/}}

{{/* An image reference from its values: repository, tag and digest. */}}
{{- define "peerlink.image" -}}
{{ .repository }}{{ with .tag }}:{{ . }}{{ end }}{{ with .digest }}@{{ . }}{{ end }}
{{- end }}

{{/* The data of ConfigMap peerlink-facts: the values under facts, as strings. */}}
{{- define "peerlink.facts.data" -}}
{{- $data := dict -}}
{{- range $key, $value := .Values.facts }}{{ $_ := set $data $key (toString $value) }}{{ end -}}
{{ toYaml $data }}
{{- end }}
