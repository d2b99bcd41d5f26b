// Package kbuild builds a kustomize directory into Kubernetes objects, as
// `kubectl apply -k` would, with sigs.k8s.io/kustomize/api. It owns only the
// build; applying the objects is the caller's business.
package kbuild
