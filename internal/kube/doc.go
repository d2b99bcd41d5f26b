// Package kube holds small facts about built-in Kubernetes objects that
// several layers read the same way.
package kube
