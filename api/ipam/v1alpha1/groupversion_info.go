package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of every kind in this package.
var GroupVersion = schema.GroupVersion{Group: "ipam.liqo.io", Version: "v1alpha1"}

// AddToScheme registers every kind of this package in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &IP{}, &IPList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
