package addons

import (
	"bytes"
	"embed"
	"fmt"
	"net/netip"
	"text/template"
)

//go:embed manifests/*.yaml
var manifests embed.FS

// Add-ons the lab can install.
const (
	CoreDNS = "coredns"
	Flannel = "flannel"
)

// Params are the facts of one cluster the manifests need.
type Params struct {
	// Registry is the host:port of the lab registry, where the add-ons'
	// images are published under lab/<program>:latest.
	Registry string
	// PodCIDR is the cluster's pod range, of which every node has a part.
	PodCIDR netip.Prefix
	// DNSIP is the ClusterIP of the kube-dns Service, the address the
	// kubelets give pods as their resolver.
	DNSIP netip.Addr
	// DNSIPs are all the kube-dns Service's ClusterIPs, DNSIP first, one
	// per family of the cluster: a dual-stack cluster's DNS Service has
	// both families.
	DNSIPs []netip.Addr
	// ClusterDomain is the DNS domain of the cluster's Services.
	ClusterDomain string
	// ClustersetDomain is the DNS zone of the Multi-Cluster Services
	// imports.
	ClustersetDomain string
	// FlannelRunDir is the host directory flanneld writes each node's
	// subnet file to, as <node name>.env.
	FlannelRunDir string
}

// Image is where the lab registry holds the image of program.
func Image(registry, program string) string {
	return registry + "/lab/" + program + ":latest"
}

// Render returns the manifests of the add-on named name for a cluster.
func Render(name string, p Params) ([]byte, error) {
	text, err := manifests.ReadFile("manifests/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("add-on %q: %w", name, err)
	}
	tmpl, err := template.New(name).Option("missingkey=error").Funcs(template.FuncMap{
		"image": func(program string) string { return Image(p.Registry, program) },
	}).Parse(string(text))
	if err != nil {
		return nil, fmt.Errorf("add-on %s: %w", name, err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, p); err != nil {
		return nil, fmt.Errorf("add-on %s: %w", name, err)
	}
	return out.Bytes(), nil
}
