package mcs

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// shardsOf encodes s in n shards, as stored.
func shardsOf(t *testing.T, s Set, n int) []Shard {
	t.Helper()
	data, _, err := new(ShardEncoder).Encode(marshalled(t, s), n)
	if err != nil {
		t.Fatal(err)
	}
	return shardsFrom(data)
}

// TestShardCount: a set takes the fewest shards, a power of two, that
// keep each within ShardBytes; it keeps a larger count it has while that
// is at most four times the fewest; a service alone over the bound does
// not split further; and no set takes more than MaxShards.
func TestShardCount(t *testing.T) {
	small := marshalled(t, setOf(numbered(10, nil)))
	// Services of 1,000 endpoints, about 40 KiB of JSON each.
	large := func(n int) *Marshalled {
		return marshalled(t, setOf(numbered(n, func(i int, s *Service) { *s = echo("default", t0, 1000); s.Name = fmt.Sprintf("s%05d", i) })))
	}
	alone := echo("default", t0, 0)
	alone.Annotations = map[string]string{"a": strings.Repeat("x", 2*ShardBytes)}
	total := func(m *Marshalled) int {
		sum := 0
		for _, d := range m.docs {
			sum += len(d) + 1
		}
		return sum
	}
	for _, tc := range []struct {
		name     string
		sizes    *Marshalled
		previous int
		check    func(n int) bool
	}{
		{"empty", marshalled(t, Set{}), 0, func(n int) bool { return n == 1 }},
		{"small", small, 0, func(n int) bool { return n == 1 }},
		{"small, had 4", small, 4, func(n int) bool { return n == 4 }},
		{"small, had 8", small, 8, func(n int) bool { return n == 1 }},
		{"large", large(12), 0, func(n int) bool { return n == 2 && large(12).fit(n) && !large(12).fit(n/2) }},
		{"large, had four times the fewest", large(12), 8, func(n int) bool { return n == 8 }},
		{"large, had eight times the fewest", large(12), 16, func(n int) bool { return n == 2 }},
		{"large, had an invalid count", large(12), 3, func(n int) bool { return n == 2 }},
		{"one service over the bound", marshalled(t, setOf([]Service{alone})), 0, func(n int) bool { return n == 1 }},
		{"more than the shards hold", large(1000), 0, func(n int) bool { return n == MaxShards }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := tc.sizes.Count(tc.previous); !tc.check(n) {
				t.Errorf("%d services of %d bytes, had %d shards: %d shards", len(tc.sizes.docs), total(tc.sizes), tc.previous, n)
			}
		})
	}
}

// TestDecodeShards: a set stored in shards reads back whole; the limits
// hold over all its shards together; a service in a shard its key does
// not hash to is rejected as a duplicate (it could be listed twice), the
// rest stands; shards that are not a whole set are refused.
func TestDecodeShards(t *testing.T) {
	set := setOf(numbered(300, nil))
	shards := shardsOf(t, set, 8)
	got, rejected, err := DecodeShards(shards, DefaultLimits, t0)
	if err != nil || len(rejected) != 0 || !maps.EqualFunc(got, set, func(a, b Service) bool { return a.Key == b.Key }) {
		t.Fatalf("%d of %d services read back, rejected %v, error %v", len(got), len(set), rejected, err)
	}
	// Every service counts against the totals, whichever its shard.
	got, rejected, err = DecodeShards(shards, Limits{Services: 250}, t0)
	if err != nil || len(got) != 250 || len(rejected) != 50 || rejected[0].Rule != RuleServices {
		t.Fatalf("limit of 250 services: %d taken, %d rejected, error %v", len(got), len(rejected), err)
	}

	// Shard 0's services written into shard 1 too.
	moved := slices.Clone(shards)
	both := split(set, 8)
	maps.Copy(both[1], both[0])
	if moved[1].Data, err = Encode(both[1]); err != nil {
		t.Fatal(err)
	}
	got, rejected, err = DecodeShards(moved, DefaultLimits, t0)
	if err != nil || len(got) != len(set) || len(rejected) != len(both[0]) {
		t.Fatalf("shard 0 repeated in shard 1: %d taken, %d rejected, error %v", len(got), len(rejected), err)
	}
	for _, r := range rejected {
		if r.Rule != RuleDuplicate {
			t.Fatalf("rejected %v, want the rule %s", r, RuleDuplicate)
		}
	}

	for _, tc := range []struct {
		name   string
		shards []Shard
	}{
		{"none", nil},
		{"one missing", shards[:7]},
		{"one twice", append(slices.Clone(shards[:7]), shards[6])},
		{"counts differ", append(slices.Clone(shards[:7]), Shard{Index: 7, Count: 16, Data: shards[7].Data})},
		{"a count not a power of two", shardsOf(t, set, 8)[:6]},
		{"more than MaxShards", shardsOf(t, set, 2*MaxShards)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "a count not a power of two" {
				for i := range tc.shards {
					tc.shards[i].Count = 6
				}
			}
			_, _, err := DecodeShards(tc.shards, DefaultLimits, t0)
			var re *RuleError
			if !errors.As(err, &re) || re.Rule != RuleUndecodable {
				t.Errorf("error %v, want the whole set refused as %s", err, RuleUndecodable)
			}
		})
	}
}

// marshalled marshals s.
func marshalled(t *testing.T, s Set) *Marshalled {
	t.Helper()
	m, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// split splits s into its n shards' sets.
func split(s Set, n int) []Set {
	out := make([]Set, n)
	for i := range out {
		out[i] = Set{}
	}
	for k, svc := range s {
		out[shardOf(k, n)][k] = svc
	}
	return out
}

// TestShardEncoder: a change to one service compresses its shard alone;
// the others are the encodings of before. With limits, a shard keeps
// within them and the services past them are rejected.
func TestShardEncoder(t *testing.T) {
	set := setOf(numbered(300, nil))
	var e ShardEncoder
	before, _, err := e.Encode(marshalled(t, set), 8)
	if err != nil {
		t.Fatal(err)
	}
	changed := set[Key{Namespace: "default", Name: "s00007"}]
	changed.Ports = append(changed.Ports, Port{Name: "extra", Protocol: "TCP", Port: 9999})
	set[changed.Key] = changed
	after, _, err := e.Encode(marshalled(t, set), 8)
	if err != nil {
		t.Fatal(err)
	}
	for i := range after {
		same := &before[i][0] == &after[i][0]
		if want := i != shardOf(changed.Key, 8); same != want {
			t.Errorf("shard %d: the encoding of before reused %v, want %v", i, same, want)
		}
	}
	got, _, err := DecodeShards(shardsFrom(after), DefaultLimits, t0)
	if err != nil || len(got[changed.Key].Ports) != 2 || len(got) != len(set) {
		t.Fatalf("read back: %d services, %v, error %v", len(got), got[changed.Key].Ports, err)
	}

	limits := Limits{DocumentBytes: 5000}
	bounded := ShardEncoder{Limits: &limits}
	shards, rejected, err := bounded.Encode(marshalled(t, set), 2)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err = DecodeShards(shardsFrom(shards), DefaultLimits, t0)
	if err != nil || len(rejected) == 0 || len(got)+len(rejected) != len(set) {
		t.Fatalf("within 5,000 bytes of JSON a shard: %d kept, %d rejected of %d, error %v", len(got), len(rejected), len(set), err)
	}
	for _, sh := range shards {
		if len(gunzipped(t, sh)) > limits.DocumentBytes {
			t.Errorf("a shard of %d bytes, over the bound", len(sh))
		}
	}
}

// shardsFrom places encoded shards.
func shardsFrom(data [][]byte) []Shard {
	out := make([]Shard, len(data))
	for i, d := range data {
		out[i] = Shard{Index: i, Count: len(data), Data: d}
	}
	return out
}

// TestShardPlace: the annotation's forms, and what is refused.
func TestShardPlace(t *testing.T) {
	for s, want := range map[string][2]int{"": {0, 1}, "0/1": {0, 1}, "3/4": {3, 4}, "15/16": {15, 16}} {
		if i, n, err := ParseShardPlace(s); err != nil || i != want[0] || n != want[1] {
			t.Errorf("%q: %d/%d, %v", s, i, n, err)
		}
		if s != "" && ShardPlace(want[0], want[1]) != s {
			t.Errorf("ShardPlace(%d, %d) = %q, want %q", want[0], want[1], ShardPlace(want[0], want[1]), s)
		}
	}
	for _, s := range []string{"1/1", "0/3", "-1/4", "4/4", "0/32", "a/b", "1", "0/0"} {
		if _, _, err := ParseShardPlace(s); err == nil {
			t.Errorf("%q taken", s)
		}
	}
	if ShardName("peerlink-service-imports", 0) != "peerlink-service-imports" || ShardName("peerlink-service-imports", 3) != "peerlink-service-imports-3" {
		t.Error("shard names")
	}
}

// TestShardDecoder: the decoder reads what DecodeShards reads, for a set
// within the limits and for one past a total (which it decodes one
// service at a time, keeping nothing); after a change to one service it
// decodes that shard alone and keeps the others' as they were.
func TestShardDecoder(t *testing.T) {
	set := setOf(numbered(300, nil))
	bad := set[Key{Namespace: "default", Name: "s00011"}]
	bad.Ports[0].Port = 0
	set[bad.Key] = bad
	same := func(d *ShardDecoder, shards []Shard, l Limits) {
		t.Helper()
		want, wantRejected, wantErr := DecodeShards(shards, l, t0)
		got, rejected, err := d.Decode(shards, l, t0)
		if (err == nil) != (wantErr == nil) || len(got) != len(want) || len(rejected) != len(wantRejected) {
			t.Fatalf("decoder: %d services, %d rejected, %v; DecodeShards: %d, %d, %v", len(got), len(rejected), err, len(want), len(wantRejected), wantErr)
		}
		for k, svc := range want {
			if g, ok := got[k]; !ok || !g.Equal(&svc) {
				t.Fatalf("%s: decoder %+v, DecodeShards %+v", k, g, svc)
			}
		}
	}
	var d ShardDecoder
	shards := shardsOf(t, set, 8)
	same(&d, shards, DefaultLimits)
	if len(d.cache) != 8 {
		t.Fatalf("%d shards kept, want 8", len(d.cache))
	}
	kept := maps.Clone(d.cache)

	changed := set[Key{Namespace: "default", Name: "s00007"}]
	changed.Ports = append(changed.Ports, Port{Name: "extra", Protocol: "TCP", Port: 9999})
	set[changed.Key] = changed
	shards = shardsOf(t, set, 8)
	same(&d, shards, DefaultLimits)
	reused := 0
	for sum, ds := range d.cache {
		if old, ok := kept[sum]; ok && &old.services[0] == &ds.services[0] {
			reused++
		}
	}
	if reused != 7 {
		t.Errorf("%d shards of 8 used again after one service changed, want 7", reused)
	}

	// Past the limit of services: as DecodeShards, nothing kept.
	same(&d, shards, Limits{Services: 250})
	if d.cache != nil {
		t.Errorf("%d shards kept of a set past its limits", len(d.cache))
	}
	// Refused whole: the same error.
	broken := slices.Clone(shards)
	broken[3].Data = []byte("not a set")
	same(&d, broken, DefaultLimits)
}
