{{/*
Helm's own labels, on the metadata of every object (never on the DaemonSet's
selector or its pods: the pods are deploy/'s, label for label). test/helm
ignores exactly these four when it compares the chart with deploy/.
*/}}
{{- define "svcproxy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/*
The data of the ConfigMap svcproxy-cluster, as JSON: host, port and
cluster-cidr as strings (a list of CIDRs joined by commas, as
--cluster-cidr takes them).
*/}}
{{- define "svcproxy.clusterData" -}}
{{- $cidr := index .Values "cluster-cidr" -}}
{{- if kindIs "slice" $cidr }}{{ $cidr = join "," $cidr }}{{ end -}}
{{- dict "host" (toString .Values.host) "port" (toString .Values.port) "cluster-cidr" (toString $cidr) | toJson -}}
{{- end -}}

{{/*
The ConfigMap's name with the suffix kustomize's configMapGenerator gives it
(sigs.k8s.io/kustomize/api/hasher: sha256 of the JSON of kind, name and data,
its first 10 hex digits with 0, 1, 3, a, e replaced by g, h, k, m, t), so that
the chart names it exactly as deploy/ does, and a changed value makes a new
ConfigMap and rolls the DaemonSet, as with kubectl apply -k. The name in
that JSON is empty: kustomize v0.21 looks "metadata/name" up as one field
name, finds none and hashes "". test/helm fails if that ever changes.
*/}}
{{- define "svcproxy.clusterName" -}}
{{- $data := include "svcproxy.clusterData" . | fromJson -}}
{{- $hash := dict "kind" "ConfigMap" "name" "" "data" $data | toJson | sha256sum | trunc 10 -}}
svcproxy-cluster-{{ $hash | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t" }}
{{- end -}}
