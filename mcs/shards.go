package mcs

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"
)

// A set is stored in shards, each a stored set of its own in a ConfigMap
// of its own, so that no set meets the API server's bound on one object
// and a change to one service rewrites one shard. A set of n shards (n a
// power of two, at most MaxShards) puts each service in the shard its
// key hashes to; each shard names its place as "<index>/<n>" in
// ShardAnnotation. Shard 0 is named as the set (ExportsConfigMap,
// ImportsConfigMap), shard i > 0 that name and "-<i>". A stored set
// without the annotation is shard 0 of 1: the form of a set before
// shards, and of every small one.
const (
	// ShardAnnotation gives a shard's place, "<index>/<count>".
	ShardAnnotation = "peerlink.io/shard"
	// MaxShards is the most shards of one set.
	MaxShards = 16
	// ShardBytes is the JSON a shard holds at most before the set takes
	// twice as many shards (unless one service alone is larger): a
	// change to one service rewrites this much at most, compressed.
	ShardBytes = 256 << 10
)

// ShardName is the name of shard i of the set named base.
func ShardName(base string, i int) string {
	if i == 0 {
		return base
	}
	return base + "-" + strconv.Itoa(i)
}

// ShardPlace is the value of ShardAnnotation for shard i of n.
func ShardPlace(i, n int) string { return strconv.Itoa(i) + "/" + strconv.Itoa(n) }

// ParseShardPlace reads a ShardAnnotation: an empty one is shard 0 of 1.
func ParseShardPlace(s string) (index, count int, err error) {
	if s == "" {
		return 0, 1, nil
	}
	i, n, ok := strings.Cut(s, "/")
	index, err1 := strconv.Atoi(i)
	count, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || !validCount(count) || index < 0 || index >= count {
		return 0, 0, fmt.Errorf("shard %q: want <index>/<count>, the count a power of two from 1 to %d", s, MaxShards)
	}
	return index, count, nil
}

func validCount(n int) bool { return n >= 1 && n <= MaxShards && n&(n-1) == 0 }

// shardOf is the shard of n that holds the service k.
func shardOf(k Key, n int) int {
	h := fnv.New32a()
	h.Write([]byte(k.Namespace))
	h.Write([]byte{'/'})
	h.Write([]byte(k.Name))
	return int(h.Sum32() & uint32(n-1))
}

// Marshalled is a set marshalled once, service by service, in key order:
// what its shards are counted from and encoded from.
type Marshalled struct {
	services []Service
	docs     [][]byte
}

// Marshal marshals s for its shards.
func Marshal(s Set) (*Marshalled, error) {
	m := &Marshalled{services: s.Sorted()}
	var err error
	if m.docs, err = marshal(m.services); err != nil {
		return nil, err
	}
	return m, nil
}

// Count is the number of shards of the set: the fewest, a power of two,
// that keep each shard's JSON within ShardBytes; or previous, the number
// the set has now, when that is valid, keeps them within it, and is at
// most four times the fewest, so that a set near a bound does not change
// its number back and forth.
func (m *Marshalled) Count(previous int) int {
	fewest := 1
	for fewest < MaxShards && !m.fit(fewest) {
		fewest *= 2
	}
	if validCount(previous) && previous > fewest && previous <= 4*fewest && m.fit(previous) {
		return previous
	}
	return fewest
}

// fit tells whether n shards keep every shard within ShardBytes, but for
// a shard of one service.
func (m *Marshalled) fit(n int) bool {
	bytes := make([]int, n)
	count := make([]int, n)
	for i, svc := range m.services {
		j := shardOf(svc.Key, n)
		bytes[j] += len(m.docs[i]) + 1
		count[j]++
	}
	for j := range n {
		if bytes[j] > ShardBytes && count[j] > 1 {
			return false
		}
	}
	return true
}

// split returns, for each of n shards, the indices of its services, in
// key order.
func (m *Marshalled) split(n int) [][]int {
	out := make([][]int, n)
	for i, svc := range m.services {
		j := shardOf(svc.Key, n)
		out[j] = append(out[j], i)
	}
	return out
}

// ShardEncoder encodes marshalled sets in shards, and keeps each shard's
// encoding to use again while the shard's services are the same, byte for
// byte: a change to one service compresses its shard alone.
type ShardEncoder struct {
	// Limits, when set, keep each shard within their byte bounds as
	// EncodeWithin does, the services past them rejected; without, a
	// shard holds all its services.
	Limits *Limits

	cache map[uint64]encodedShard
}

// encodedShard is a shard as encoded, and what was rejected of it.
type encodedShard struct {
	data     []byte
	rejected []Rejected
}

// Encode encodes m in n shards (a count of m.Count), in order, and returns
// what the limits rejected.
func (e *ShardEncoder) Encode(m *Marshalled, n int) ([][]byte, []Rejected, error) {
	used := make(map[uint64]encodedShard, n)
	shards := make([][]byte, n)
	var rejected []Rejected
	for j, members := range m.split(n) {
		h := fnv.New64a()
		docs := make([][]byte, len(members))
		services := make([]Service, len(members))
		for k, i := range members {
			docs[k], services[k] = m.docs[i], m.services[i]
			h.Write(docs[k])
			h.Write([]byte{'\n'})
		}
		sum := h.Sum64()
		enc, ok := e.cache[sum]
		if !ok {
			var err error
			if enc, err = e.encode(services, docs); err != nil {
				return nil, nil, err
			}
		}
		used[sum] = enc
		shards[j] = enc.data
		rejected = append(rejected, enc.rejected...)
	}
	// What this call did not use is dropped, unless the cache is small:
	// several counts of one set (peers of different counts) keep theirs.
	if len(e.cache)+len(used) > 4*MaxShards {
		e.cache = used
	} else {
		if e.cache == nil {
			e.cache = map[uint64]encodedShard{}
		}
		maps.Copy(e.cache, used)
	}
	return shards, rejected, nil
}

// encode encodes the services of one shard, marshalled as docs.
func (e *ShardEncoder) encode(services []Service, docs [][]byte) (encodedShard, error) {
	if e.Limits == nil {
		data, _, err := encode(docs, math.MaxInt, math.MaxInt)
		return encodedShard{data: data}, err
	}
	data, rejected, err := encodeWithin(services, docs, *e.Limits)
	return encodedShard{data: data, rejected: rejected}, err
}

// Shard is one stored shard of a set.
type Shard struct {
	// Index and Count are its place (ShardAnnotation).
	Index, Count int
	// Data is the stored set it holds.
	Data []byte
}

// DecodeShards reads a set stored in shards as Decode reads one stored
// set, the limits applying to the whole: the services of all shards count
// against the same totals (their JSON against l.DocumentBytes), each
// shard is bound by l.EncodedBytes and l.DocumentBytes, and a service
// found in a shard its key does not hash to is rejected as a duplicate.
// The shards must be the whole set: Count shards, each index once.
func DecodeShards(shards []Shard, l Limits, now time.Time) (Set, []Rejected, error) {
	l = l.WithDefaults()
	if err := whole(shards); err != nil {
		return nil, nil, err
	}
	d := &decoder{limits: l, now: now, set: Set{}, tally: NewTally(l)}
	for _, sh := range shards {
		if err := d.shard(sh); err != nil {
			return nil, nil, err
		}
	}
	return d.set, d.rejected, nil
}

// whole checks that shards are a whole set: Count shards, each index once.
func whole(shards []Shard) error {
	if len(shards) == 0 || !validCount(shards[0].Count) || len(shards) != shards[0].Count {
		return documentError(RuleUndecodable, nil, "%d shards, not a whole set", len(shards))
	}
	have := make([]bool, len(shards))
	for _, sh := range shards {
		if sh.Count != len(shards) || sh.Index < 0 || sh.Index >= sh.Count || have[sh.Index] {
			return documentError(RuleUndecodable, nil, "shard %s among %d shards, not a whole set", ShardPlace(sh.Index, sh.Count), len(shards))
		}
		have[sh.Index] = true
	}
	return nil
}

// ShardDecoder decodes sets stored in shards as DecodeShards does, and
// keeps what it decoded of each shard to use again while the shard's
// bytes are the same (for a minute at most, as the export times are
// checked against the clock): a change to one service decodes its shard
// alone. What it keeps is what the set holds: when the set's services
// would take a total of the limits past its bound, it decodes the whole
// set as DecodeShards does, one service at a time, and keeps nothing.
type ShardDecoder struct {
	cache map[uint64]decodedShard
}

// decodedShard is what one shard held within the limits.
type decodedShard struct {
	services []Service
	rejected []Rejected
	cost     Cost
	at       time.Time
}

// reuseFor is how long a decoded shard is used again.
const reuseFor = time.Minute

// Decode decodes shards within l; now is this cluster's clock.
func (e *ShardDecoder) Decode(shards []Shard, l Limits, now time.Time) (Set, []Rejected, error) {
	l = l.WithDefaults()
	if err := whole(shards); err != nil {
		return nil, nil, err
	}
	next := make(map[uint64]decodedShard, len(shards))
	var total Cost
	decoded := make([]decodedShard, len(shards))
	for _, sh := range shards {
		h := fnv.New64a()
		h.Write([]byte(ShardPlace(sh.Index, sh.Count)))
		h.Write(sh.Data)
		sum := h.Sum64()
		ds, ok := e.cache[sum]
		if !ok || now.Sub(ds.at) > reuseFor || now.Before(ds.at) {
			var fits bool
			var err error
			if ds, fits, err = decodeShard(sh, l, now, total); err != nil {
				e.cache = nil
				return nil, nil, err
			}
			if !fits {
				e.cache = nil
				return DecodeShards(shards, l, now)
			}
		}
		total = total.plus(ds.cost)
		decoded[sh.Index] = ds
		next[sum] = ds
	}
	set := make(Set, total.Services)
	var rejected []Rejected
	for _, ds := range decoded {
		for _, svc := range ds.services {
			set[svc.Key] = svc
		}
		rejected = append(rejected, ds.rejected...)
	}
	if !l.within(total) || len(rejected) > l.Services {
		e.cache = nil
		return DecodeShards(shards, l, now)
	}
	e.cache = next
	return set, rejected, nil
}

// decodeShard decodes one shard as the services after those costing
// before; fits says no service of it was rejected by a total, so that
// what it holds stands whatever the other shards hold, as long as all
// together are within the totals.
func decodeShard(sh Shard, l Limits, now time.Time, before Cost) (decodedShard, bool, error) {
	d := &decoder{limits: l, now: now, set: Set{}, tally: NewTally(l)}
	d.tally.sum = before
	if err := d.shard(sh); err != nil {
		return decodedShard{}, false, err
	}
	ds := decodedShard{services: make([]Service, 0, len(d.set)), rejected: d.rejected, cost: d.tally.Sum().minus(before), at: now}
	for _, r := range d.rejected {
		if totalRule(r.Rule) {
			return decodedShard{}, false, nil
		}
	}
	for _, svc := range d.set {
		ds.services = append(ds.services, svc)
	}
	return ds, true, nil
}

// ShardNames are the names every shard of the set named base may take.
func ShardNames(base string) []string {
	names := make([]string, MaxShards)
	for i := range names {
		names[i] = ShardName(base, i)
	}
	return names
}
