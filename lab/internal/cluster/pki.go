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
)

// certValidity is long enough for a lab left running, short enough not to
// look like a real credential.
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
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "peerlink-lab " + n.Name + " CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := sign(caTmpl, caTmpl, caKey, caKey)
	if err != nil {
		return fmt.Errorf("cluster %s ca: %w", n.Name, err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("cluster %s ca: %w", n.Name, err)
	}
	if err := writePair(dir, "ca", caDER, caKey); err != nil {
		return err
	}

	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(certValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{
			net.IP(n.NodeIP().AsSlice()),
			net.IP(n.APIServiceIP().AsSlice()),
			net.IPv4(127, 0, 0, 1),
		},
	}
	if err := issue(dir, "apiserver", serving, ca, caKey); err != nil {
		return fmt.Errorf("cluster %s: %w", n.Name, err)
	}

	saKey, err := newKey()
	if err != nil {
		return fmt.Errorf("cluster %s service-account key: %w", n.Name, err)
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), saKey); err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return fmt.Errorf("cluster %s service-account key: %w", n.Name, err)
	}
	if err := writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", saPub); err != nil {
		return err
	}

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	for _, id := range n.clients() {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.user, Organization: id.groups},
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.Add(certValidity),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if err := issue(dir, id.file, tmpl, ca, caKey); err != nil {
			return fmt.Errorf("cluster %s: %w", n.Name, err)
		}
		if err := n.writeKubeconfig(id, caPEM); err != nil {
			return err
		}
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for a client identity, with the
// certificates inlined so the file can be copied elsewhere.
func (n *Cluster) writeKubeconfig(id identity, caPEM []byte) error {
	cert, err := os.ReadFile(n.path("pki", id.file+".crt"))
	if err != nil {
		return fmt.Errorf("cluster %s kubeconfig %s: %w", n.Name, id.file, err)
	}
	key, err := os.ReadFile(n.path("pki", id.file+".key"))
	if err != nil {
		return fmt.Errorf("cluster %s kubeconfig %s: %w", n.Name, id.file, err)
	}
	name := n.Name
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: n.APIServerURL(), CertificateAuthorityData: caPEM}
	cfg.AuthInfos[id.user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
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

// issue signs tmpl with the CA and writes <name>.crt and <name>.key.
func issue(dir, name string, tmpl, ca *x509.Certificate, caKey crypto.Signer) error {
	key, err := newKey()
	if err != nil {
		return fmt.Errorf("certificate %s: %w", name, err)
	}
	der, err := sign(tmpl, ca, key, caKey)
	if err != nil {
		return fmt.Errorf("certificate %s: %w", name, err)
	}
	return writePair(dir, name, der, key)
}

func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, parentKey crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
}

func writePair(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+".key"), key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("key %s: %w", path, err)
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
