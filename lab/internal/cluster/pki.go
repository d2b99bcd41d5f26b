package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// certValidity is how long the certificates the CA signs are valid: long
// enough for a lab left running, short enough not to look like a real
// credential. The CA itself is valid for the ten years client-go's
// cert.NewSelfSignedCACert gives it.
const certValidity = 365 * 24 * time.Hour

// identity is a client certificate subject: Kubernetes takes the user from
// the common name and the groups from the organizations.
type identity struct {
	file   string
	user   string
	groups []string
}

// clients are the cluster's users; each gets a certificate and a kubeconfig
// named after file. The admin kubeconfig is the one handed to users.
func (n *Cluster) clients() []identity {
	ids := []identity{
		{file: "admin", user: "kubernetes-admin", groups: []string{"system:masters"}},
		{file: "kube-controller-manager", user: "system:kube-controller-manager"},
		{file: "kube-scheduler", user: "system:kube-scheduler"},
		{file: "kube-proxy", user: "system:kube-proxy"},
		{file: "apiserver-kubelet-client", user: "kube-apiserver-kubelet-client", groups: []string{"system:masters"}},
	}
	// Each kubelet is its node, as the Node authorizer requires.
	for _, node := range n.Nodes() {
		ids = append(ids, identity{file: node.kubeletIdentity(), user: "system:node:" + node.Name(), groups: []string{"system:nodes"}})
	}
	return ids
}

// kubeletIdentity names the node's kubelet certificate and kubeconfig.
func (n *Node) kubeletIdentity() string { return "kubelet-" + n.Name() }

// writePKI creates the cluster's CA, the API server's serving certificate,
// the service-account signing key, and a certificate and kubeconfig for each
// client.
func (n *Cluster) writePKI() error {
	dir := n.path("pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cluster %s pki: %w", n.Name, err)
	}
	now := time.Now()
	caKey, err := newKey()
	if err != nil {
		return fmt.Errorf("cluster %s ca key: %w", n.Name, err)
	}
	ca, err := cert.NewSelfSignedCACert(cert.Config{CommonName: "peerlink-lab " + n.Name + " CA", NotBefore: now.Add(-time.Hour)}, caKey)
	if err != nil {
		return fmt.Errorf("cluster %s ca: %w", n.Name, err)
	}
	signer := &certSigner{ca: ca, key: caKey, now: now}
	caPEM, _, err := writePair(dir, "ca", ca, caKey)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", n.Name, err)
	}

	// Pods reach the API server at the kubernetes Service's addresses, and
	// the nodes of an IPv6 cluster at the control-plane node's IPv6 address.
	ips := []net.IP{net.IP(n.NodeIP().AsSlice())}
	for _, a := range n.APIServiceIPs() {
		ips = append(ips, net.IP(a.AsSlice()))
	}
	if n.IPFamily.HasIPv6() {
		ips = append(ips, net.IP(n.ControlPlane().IP6().AsSlice()))
	}
	serving := cert.Config{
		CommonName: "kube-apiserver",
		Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		AltNames: cert.AltNames{
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default",
				"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			IPs: append(ips, net.IPv4(127, 0, 0, 1)),
		},
	}
	if _, _, err := signer.issue(dir, "apiserver", serving); err != nil {
		return fmt.Errorf("cluster %s: %w", n.Name, err)
	}

	if err := writeServiceAccountKey(dir); err != nil {
		return fmt.Errorf("cluster %s: %w", n.Name, err)
	}

	for _, id := range n.clients() {
		client := cert.Config{
			CommonName:   id.user,
			Organization: id.groups,
			Usages:       []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		certPEM, keyPEM, err := signer.issue(dir, id.file, client)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", n.Name, err)
		}
		if err := n.writeKubeconfig(id, caPEM, certPEM, keyPEM); err != nil {
			return err
		}
	}
	return nil
}

// writeServiceAccountKey writes the key the API server signs service
// account tokens with (sa.key) and its public half (sa.pub), which the API
// server checks them with.
func writeServiceAccountKey(dir string) error {
	key, err := newKey()
	if err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	if _, err := writeKey(filepath.Join(dir, "sa.key"), key); err != nil {
		return err
	}
	// client-go has no encoder of public keys: PKIX DER in a PUBLIC KEY
	// block is what keyutil.ParsePublicKeysPEM reads.
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	path := filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for a client identity, with the
// certificates inlined so the file can be copied elsewhere.
func (n *Cluster) writeKubeconfig(id identity, caPEM, certPEM, keyPEM []byte) error {
	name := n.Name
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: n.APIServerURL(), CertificateAuthorityData: caPEM}
	cfg.AuthInfos[id.user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: id.user}
	cfg.CurrentContext = name
	path := n.componentKubeconfig(id.file)
	if id.file == "admin" {
		path = n.Kubeconfig()
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("cluster %s kubeconfig %s: %w", n.Name, id.file, err)
	}
	return nil
}

func (n *Cluster) componentKubeconfig(name string) string {
	return n.path("pki", name+".kubeconfig")
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// certSigner signs certificates with the cluster's CA. client-go's cert
// package makes self-signed certificates only; signing with a CA is the
// one step the lab does itself, as kubeadm's pkiutil does.
type certSigner struct {
	ca  *x509.Certificate
	key crypto.Signer
	// now is when the cluster's certificates are made: each is valid from
	// an hour before, so that a clock a little behind still takes it, to
	// certValidity after.
	now time.Time
}

// issue makes a key and a certificate of cfg signed by the CA, writes them
// as <name>.crt and <name>.key in dir, and returns both PEM encoded.
func (s *certSigner) issue(dir, name string, cfg cert.Config) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, fmt.Errorf("certificate %s: %w", name, err)
	}
	c, err := s.sign(cfg, key.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("certificate %s: %w", name, err)
	}
	return writePair(dir, name, c, key)
}

// sign returns the certificate of cfg for pub, signed by the CA: the
// subject, alternative names and extended usages of cfg, and the digital
// signature key usage (the keys are ECDSA, which sign but do not encrypt).
// cfg.NotBefore is not read: all the cluster's certificates share one
// validity.
func (s *certSigner) sign(cfg cert.Config, pub crypto.PublicKey) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cfg.CommonName, Organization: cfg.Organization},
		DNSNames:     cfg.AltNames.DNSNames,
		IPAddresses:  cfg.AltNames.IPs,
		NotBefore:    s.now.Add(-time.Hour),
		NotAfter:     s.now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  cfg.Usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.ca, pub, s.key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// writePair writes c as <name>.crt and key as <name>.key in dir, and returns
// both PEM encoded.
func writePair(dir, name string, c *x509.Certificate, key crypto.PrivateKey) (certPEM, keyPEM []byte, err error) {
	certPEM, err = cert.EncodeCertificates(c)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate %s: %w", name, err)
	}
	path := filepath.Join(dir, name+".crt")
	if err := cert.WriteCert(path, certPEM); err != nil {
		return nil, nil, fmt.Errorf("write %s: %w", path, err)
	}
	keyPEM, err = writeKey(filepath.Join(dir, name+".key"), key)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// writeKey writes key PEM encoded to path, readable by its owner only, and
// returns the PEM.
func writeKey(path string, key crypto.PrivateKey) ([]byte, error) {
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", path, err)
	}
	if err := keyutil.WriteKey(path, keyPEM); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return keyPEM, nil
}
