package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PublicKeySpec carries a WireGuard public key.
type PublicKeySpec struct {
	// The length is checked on the text, by a pattern matching exactly the
	// standard base64 of 32 bytes, and not by a CEL rule on the bytes: CEL
	// decodes format-byte strings with the URL alphabet, so such a rule
	// rejects every key whose base64 holds + or /, most keys.

	// PublicKey is the 32-byte key; in YAML its base64, as `wg pubkey` prints it.
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$`
	PublicKey []byte `json:"publicKey"`

	// NextPublicKey is the key the peer's gateway is about to switch to
	// (peerlink): the local gateway accepts both until the peer's tunnel
	// runs on this one, and tells the peer that it does.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$`
	NextPublicKey []byte `json:"nextPublicKey,omitempty"`
}

// PublicKey is the WireGuard public key of a peer's gateway. Its
// remote-cluster-id label names the cluster that owns the key.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=publickeies,singular=publickey,shortName=pk;pkies;pkey,categories=liqo
type PublicKey struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PublicKeySpec `json:"spec"`
}

// PublicKeyList is a list of PublicKey.
//
// +kubebuilder:object:root=true
type PublicKeyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PublicKey `json:"items"`
}
