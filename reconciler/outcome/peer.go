package outcome

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
)

// Reasons of an object that does not name its peer rightly.
const (
	// ReasonMissingRemoteClusterID: the liqo.io/remote-cluster-id label is
	// missing or empty.
	ReasonMissingRemoteClusterID = "MissingRemoteClusterID"
	// ReasonOwnClusterID: the label names this cluster.
	ReasonOwnClusterID = "OwnClusterID"
)

// RemoteClusterID returns the peer an object declares or connects to, from
// its mandatory remote-cluster-id label, which must not name this cluster.
func RemoteClusterID(obj metav1.Object, ownClusterID string) (string, error) {
	id := obj.GetLabels()[netv1beta1.RemoteClusterIDLabel]
	switch {
	case id == "":
		return "", Stall(ReasonMissingRemoteClusterID,
			"metadata.labels[%s] is missing: set it to the ID of the peer cluster", netv1beta1.RemoteClusterIDLabel)
	case id == ownClusterID:
		return "", Stall(ReasonOwnClusterID,
			"metadata.labels[%s] is %q, the ID of this cluster: set it to the ID of the peer cluster",
			netv1beta1.RemoteClusterIDLabel, id)
	}
	return id, nil
}
