// Package kbuild builds a kustomize directory into Kubernetes objects, as
// `kubectl apply -k` would, with sigs.k8s.io/kustomize/api. BuildLocalFS
// builds a directory that came from outside this cluster's trust (a peer
// bundle) from local files only: it refuses remote resources, bases and
// files before kustomize could fetch them. It owns only the build; applying
// the objects is the caller's business.
package kbuild
