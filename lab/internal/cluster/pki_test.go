package cluster

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// TestWritePKI reads back what writePKI writes, as the cluster's components
// read it: each certificate chains to the CA for its usage, holds the names
// the components are reached by or authenticate as, is valid now and pairs
// with its key; each kubeconfig carries the same certificate and key.
func TestWritePKI(t *testing.T) {
	c := &Cluster{Index: 11, Name: "pki-a", NodeCount: 2, Dir: t.TempDir(),
		PodCIDR: netip.MustParsePrefix("10.244.0.0/24"), ServiceCIDR: netip.MustParsePrefix("10.97.0.0/16")}
	if err := c.writePKI(); err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(c.path("pki", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// load returns the certificate of name, checked against its key.
	load := func(name string) *x509.Certificate {
		t.Helper()
		certs, err := cert.ParseCertsPEM(read(name + ".crt"))
		if err != nil || len(certs) != 1 {
			t.Fatalf("%s.crt: %d certificates, %v", name, len(certs), err)
		}
		key, err := keyutil.ParsePrivateKeyPEM(read(name + ".key"))
		if err != nil {
			t.Fatalf("%s.key: %v", name, err)
		}
		ec, ok := key.(*ecdsa.PrivateKey)
		if !ok || !ec.PublicKey.Equal(certs[0].PublicKey) {
			t.Errorf("%s.key is not the key of %s.crt", name, name)
		}
		if now := time.Now(); now.Before(certs[0].NotBefore) || now.After(certs[0].NotAfter) {
			t.Errorf("%s.crt is valid from %s to %s, not now", name, certs[0].NotBefore, certs[0].NotAfter)
		}
		return certs[0]
	}

	ca := load("ca")
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("ca.crt is no CA: IsCA %v, key usage %b", ca.IsCA, ca.KeyUsage)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	verify := func(name string, c *x509.Certificate, usage x509.ExtKeyUsage, host string) {
		t.Helper()
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: host}); err != nil {
			t.Errorf("%s.crt: %v", name, err)
		}
	}

	serving := load("apiserver")
	for _, host := range []string{"localhost", "kubernetes.default.svc", "172.30.11.2", "10.97.0.1", "127.0.0.1"} {
		verify("apiserver", serving, x509.ExtKeyUsageServerAuth, host)
	}
	if got := serving.NotAfter.Sub(serving.NotBefore); got != certValidity+time.Hour {
		t.Errorf("apiserver.crt is valid for %s, want %s", got, certValidity+time.Hour)
	}

	for _, id := range c.clients() {
		leaf := load(id.file)
		verify(id.file, leaf, x509.ExtKeyUsageClientAuth, "")
		if leaf.Subject.CommonName != id.user || !slices.Equal(leaf.Subject.Organization, id.groups) {
			t.Errorf("%s.crt is for %s in %v, want %s in %v", id.file, leaf.Subject.CommonName, leaf.Subject.Organization, id.user, id.groups)
		}
		path := c.componentKubeconfig(id.file)
		if id.file == "admin" {
			path = c.Kubeconfig()
		}
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		auth := cfg.AuthInfos[id.user]
		if auth == nil || !bytes.Equal(auth.ClientCertificateData, read(id.file+".crt")) || !bytes.Equal(auth.ClientKeyData, read(id.file+".key")) {
			t.Errorf("%s: the kubeconfig does not hold %s.crt and %s.key", path, id.file, id.file)
		}
		if cl := cfg.Clusters[c.Name]; cl == nil || !bytes.Equal(cl.CertificateAuthorityData, read("ca.crt")) || cl.Server != c.APIServerURL() {
			t.Errorf("%s: the kubeconfig does not point at %s with ca.crt", path, c.APIServerURL())
		}
	}

	// The API server checks with sa.pub the tokens it signs with sa.key.
	signing, err := keyutil.ParsePrivateKeyPEM(read("sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	pubs, err := keyutil.ParsePublicKeysPEM(read("sa.pub"))
	if err != nil || len(pubs) != 1 {
		t.Fatalf("sa.pub: %d keys, %v", len(pubs), err)
	}
	if ec, ok := signing.(*ecdsa.PrivateKey); !ok || !ec.PublicKey.Equal(pubs[0]) {
		t.Error("sa.pub is not the public half of sa.key")
	}
	for _, name := range []string{"ca.key", "apiserver.key", "sa.key", "admin.key"} {
		if fi, err := os.Stat(c.path("pki", name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v: want a file only its owner reads", name, fi.Mode(), err)
		}
	}
}
