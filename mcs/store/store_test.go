package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/peerlink/peerlink/mcs"
	"github.com/peerlink/peerlink/testkit/testcluster"
)

// TestWriteRead runs the store against a real API server: shards written
// read back whole, in order; a shard that did not change is not written
// again; the shards past a smaller count are deleted; and a set whose
// shards are not all there, or not all of the count shard 0 names, reads
// as incomplete, one without shard 0 as not found.
func TestWriteRead(t *testing.T) {
	c := testcluster.Start(t).Client
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}); err != nil {
		t.Fatal(err)
	}
	target := Target{Namespace: "tenant", Name: mcs.ImportsConfigMap,
		Labels: map[string]string{mcs.ExchangeLabel: mcs.ImportsRole}, Annotations: map[string]string{"example.com/on-first": "yes"}}
	read := func() (Stored, error) { return Read(ctx, c, "tenant", mcs.ImportsConfigMap, mcs.ImportsRole) }
	if _, err := read(); !apierrors.IsNotFound(err) {
		t.Fatalf("nothing written: %v, want not found", err)
	}
	shards := func(n int, tag string) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = fmt.Appendf(nil, "shard %d %s", i, tag)
		}
		return out
	}
	if err := Write(ctx, c, target, shards(4, "a")); err != nil {
		t.Fatal(err)
	}
	got, err := read()
	if err != nil || len(got.Shards) != 4 || got.Annotations["example.com/on-first"] != "yes" {
		t.Fatalf("4 shards written: %d read, annotations %v, %v", len(got.Shards), got.Annotations, err)
	}
	for i, sh := range got.Shards {
		if sh.Index != i || sh.Count != 4 || string(sh.Data) != fmt.Sprintf("shard %d a", i) {
			t.Errorf("shard %d: %d/%d %q", i, sh.Index, sh.Count, sh.Data)
		}
	}
	if n, err := Count(ctx, c, "tenant", mcs.ImportsConfigMap, mcs.ImportsRole); err != nil || n != 4 {
		t.Errorf("count %d, %v, want 4", n, err)
	}

	// One shard changed: its version alone moves.
	next := shards(4, "a")
	next[2] = []byte("shard 2 b")
	if err := Write(ctx, c, target, next); err != nil {
		t.Fatal(err)
	}
	again, err := read()
	if err != nil {
		t.Fatal(err)
	}
	versions := func() []string {
		var cms corev1.ConfigMapList
		if err := c.List(ctx, &cms, client.InNamespace("tenant")); err != nil {
			t.Fatal(err)
		}
		out := make([]string, 4)
		for _, cm := range cms.Items {
			for i := range 4 {
				if cm.Name == mcs.ShardName(mcs.ImportsConfigMap, i) {
					out[i] = cm.ResourceVersion
				}
			}
		}
		return out
	}
	if again.Version == got.Version {
		t.Error("the set's version did not change with a shard")
	}
	after := versions()
	if err := Write(ctx, c, target, next); err != nil {
		t.Fatal(err)
	}
	if same := versions(); fmt.Sprint(same) != fmt.Sprint(after) {
		t.Errorf("the same shards written again: versions %v, then %v", after, same)
	}

	// Fewer shards: those past the count go.
	if err := Write(ctx, c, target, shards(2, "c")); err != nil {
		t.Fatal(err)
	}
	if got, err = read(); err != nil || len(got.Shards) != 2 {
		t.Fatalf("2 shards written: %d read, %v", len(got.Shards), err)
	}
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace("tenant"), client.HasLabels{mcs.ExchangeLabel}); err != nil || len(cms.Items) != 2 {
		t.Errorf("%d ConfigMaps left, want the 2 shards", len(cms.Items))
	}

	// A writer between counts: shard 0 names 4, the others are missing or
	// of 2.
	for _, tc := range []struct {
		name   string
		before [][]byte
	}{{"shard 0 of 4 alone", shards(1, "d")}, {"shard 0 of 4 beside shard 1 of 2", shards(2, "e")}} {
		if err := Write(ctx, c, target, tc.before); err != nil {
			t.Fatal(err)
		}
		var first corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: mcs.ImportsConfigMap}, &first); err != nil {
			t.Fatal(err)
		}
		first.Annotations[mcs.ShardAnnotation] = mcs.ShardPlace(0, 4)
		if err := c.Update(ctx, &first); err != nil {
			t.Fatal(err)
		}
		if _, err := read(); !errors.Is(err, ErrIncomplete) {
			t.Errorf("%s: %v, want incomplete", tc.name, err)
		}
	}
}
