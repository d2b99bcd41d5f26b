package api

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	ipamv1alpha1 "github.com/peerlink/peerlink/api/ipam/v1alpha1"
	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// Field managers of server-side apply.
const (
	// FieldManager owns what the controller and the agents write: the
	// objects they make, the statuses and the Connections.
	FieldManager = "peerlink"
	// CLIFieldManager owns what the CLI applies, apart from the
	// controller's fields and from those of a GitOps engine.
	CLIFieldManager = "peerlink-cli"
)

// NewScheme returns a scheme with the built-in Kubernetes kinds, the
// networking.liqo.io/v1beta1 kinds, the ipam.liqo.io/v1alpha1 IP and the
// Multi-Cluster Services kinds (multicluster.x-k8s.io/v1beta1).
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add kubernetes kinds to scheme: %w", err)
	}
	if err := netv1beta1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add networking.liqo.io/v1beta1 kinds to scheme: %w", err)
	}
	if err := ipamv1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add ipam.liqo.io/v1alpha1 kinds to scheme: %w", err)
	}
	if err := mcsv1beta1.Install(s); err != nil {
		return nil, fmt.Errorf("add multicluster.x-k8s.io/v1beta1 kinds to scheme: %w", err)
	}
	return s, nil
}
