package reconciler

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	netv1beta1 "github.com/peerlink/peerlink/api/networking/v1beta1"
	"github.com/peerlink/peerlink/internal/cidr"
	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/reconciler/services"
)

// TestServicesFamilies imports from a dual-stack peer whose IPv6 pod range
// is this cluster's own: each of its endpoint groups becomes an
// EndpointSlice of its own family, with addresses in the range the
// Configuration remapped them to, and the derived Service of a dual-stack
// export asks for both families and gets what this cluster has (the test
// API server is IPv4 only): the ServiceImport's IPs and families follow.
// An IPv6-only export, which this cluster cannot serve, is imported
// without a clusterset IP and not ready, with IPFamilyNotSupported.
func TestServicesFamilies(t *testing.T) {
	e := newConfEnv(t, "peerlink", "demo", "liqo-tenant-b")
	e.facts.PodCIDRs = append(e.facts.PodCIDRs, netip.MustParsePrefix("fd44::/48"))
	c := e.cluster.Client
	e.run(t)
	var demo corev1.Namespace
	if err := c.Get(t.Context(), types.NamespacedName{Name: "demo"}, &demo); err != nil {
		t.Fatal(err)
	}
	demo.Labels[mcs.ImportNamespaceLabel] = "true"
	if err := c.Update(t.Context(), &demo); err != nil {
		t.Fatal(err)
	}
	e.create(t, newConf("liqo-tenant-b", "b", "b", []string{"10.244.0.0/16", "fd44::/48"}))
	conf := e.waitConf(t, "liqo-tenant-b", "b", "remapped", func(conf *netv1beta1.Configuration) error {
		if conf.Status.Remote == nil || len(conf.Status.Remote.CIDR.Pod) != 2 {
			return fmt.Errorf("status.remote %+v, conditions %+v", conf.Status.Remote, conf.Status.Conditions)
		}
		return nil
	})
	v6 := netip.MustParsePrefix(string(conf.Status.Remote.CIDR.Pod[1]))
	if !v6.Addr().Is6() || v6.Overlaps(netip.MustParsePrefix("fd44::/48")) {
		t.Fatalf("b's IPv6 pod range remapped to %s, want an IPv6 range apart from this cluster's fd44::/48", v6)
	}
	want6, err := cidr.Translate(netip.MustParseAddr("fd44::2:7"), netip.MustParsePrefix("fd44::/48"), v6)
	if err != nil {
		t.Fatal(err)
	}

	web := peerWeb(80)
	web.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	web.Endpoints = append(web.Endpoints, mcs.EndpointGroup{
		Ports: web.Endpoints[0].Ports,
		Endpoints: []mcs.Endpoint{
			{IP: netip.MustParseAddr("fd44::2:7"), Ready: true},
			// Of the other family than its group: dropped.
			{IP: netip.MustParseAddr("10.244.2.8"), Ready: true},
		},
	})
	six := peerWeb(80)
	six.Key.Name = "six"
	six.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	six.Endpoints = web.Endpoints[1:]
	receive(t, c, "liqo-tenant-b", web, six)

	waitFor(t, "an EndpointSlice per family", func(ctx context.Context) error {
		list, err := importedSlices(ctx, c, "b")
		if err != nil {
			return err
		}
		var got []string
		for _, s := range list {
			for _, ep := range s.Endpoints {
				got = append(got, fmt.Sprintf("%s %s", s.AddressType, ep.Addresses[0]))
			}
		}
		slices.Sort(got)
		want := []string{"IPv4 10.0.2.7", "IPv6 " + want6.String()}
		if !slices.Equal(got, want) {
			return fmt.Errorf("imported %v, want %v", got, want)
		}
		return nil
	})
	waitFor(t, "the ServiceImport with this cluster's families", func(ctx context.Context) error {
		var si mcsv1beta1.ServiceImport
		if err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "web"}, &si); err != nil {
			return err
		}
		if len(si.Spec.IPs) != 1 || !slices.Equal(si.Spec.IPFamilies, []corev1.IPFamily{corev1.IPv4Protocol}) {
			return fmt.Errorf("ips %v families %v, want one IPv4 address", si.Spec.IPs, si.Spec.IPFamilies)
		}
		var svc corev1.Service
		if err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: si.Annotations[services.DerivedServiceAnnotation]}, &svc); err != nil {
			return err
		}
		if p := svc.Spec.IPFamilyPolicy; p == nil || *p != corev1.IPFamilyPolicyPreferDualStack {
			return fmt.Errorf("derived Service's family policy %v, want PreferDualStack", p)
		}
		return nil
	})
	// An IPv6 Service cannot be had here: the import says so.
	waitFor(t, "the IPv6-only import not ready, for its family", func(ctx context.Context) error {
		var si mcsv1beta1.ServiceImport
		if err := c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "six"}, &si); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported) || len(si.Spec.IPs) != 0 {
			return fmt.Errorf("ips %v, Ready %+v", si.Spec.IPs, cond)
		}
		return nil
	})
}
