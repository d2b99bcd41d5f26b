{{/*
Generated from bundles/install by package internal/helmchart: edit the
bundle, then run `make generate`.
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

{{/*
The name of ConfigMap peerlink-facts, with the hash of its content that kustomize's
configMapGenerator appends: the first ten hexadecimal digits of the SHA-256
of the JSON of kind, name and data, with 0, 1, 3, a and e replaced so that
it never reads as a number. kustomize's hasher looks the name up as one
field called "metadata/name", finds none, and so hashes an empty name.
*/}}
{{- define "peerlink.facts.name" -}}
{{- $data := include "peerlink.facts.data" . | fromYaml -}}
{{- $hash := dict "kind" "ConfigMap" "name" "" "data" $data | toJson | sha256sum | trunc 10 -}}
peerlink-facts-{{ $hash | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t" }}
{{- end }}
